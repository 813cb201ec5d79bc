"""Part endpoints' decisions (docs/protocol.md: Part endpoints). Pure, no I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

from shared.protocol.tags import upstream_content_tags
from shared.wire import USER_HEADER


def part_unchanged(
    client_tag: str | None,
    policy_version: str,
    stored_content: str | None,
    *,
    owner: str | None,
    user_id: str,
    now_ms: int,
) -> bool:
    """A part the app already holds costs no upstream call and no data: its request's tag is
    valid (of this policy version, not issued while the tag cache was down) and its content
    tag is still the one stored, on an order whose tags name the requesting user its owner.
    An order of another user (or of none known) is asked of its upstream as before, which
    checks the user: an `unchanged` must not tell anyone that a guessed content tag of
    another user's order is current."""
    if stored_content is None or owner is None or owner != user_id:
        return False
    return upstream_content_tags(client_tag, policy_version, now_ms) == stored_content


# what reaches a part upstream but is not a parameter of the question: the request id names
# one call; the user id, the order id and the content tags are in the kept part's key on
# their own (the content tag read before the fetch) or set per call
NOT_PARAMETERS = frozenset({"x-request-id", USER_HEADER.lower()})
SET_PER_CALL = frozenset({"orderid", "tags", "at_least"})


def upstream_params_digest(fields: Mapping[str, Any], headers: Mapping[str, str]) -> str:
    """A digest of what a part request sends its upstream beside the order: the body's other
    fields and the forwarded headers (Accept-Language, User-Agent), not the request id (nor
    the user id, keyed on its own). Two requests with one digest ask the upstream the same
    question about an order, so one's data may answer the other (docs/protocol.md: Part
    endpoints). Header names are compared as HTTP does, case-insensitively; field order is
    not a difference."""
    body = {name: value for name, value in fields.items() if name not in SET_PER_CALL}
    sent = {
        name.lower(): value for name, value in headers.items() if name.lower() not in NOT_PARAMETERS
    }
    encoded = msgspec.json.encode([body, sent], order="sorted")
    return hashlib.blake2b(encoded, digest_size=12).hexdigest()


def kept_part_serves(
    kept_content: str,
    kept_issued_ms: int,
    stored_content: str | None,
    *,
    now_ms: int,
    ttl_ms: int,
) -> bool:
    """Part data kept in the shared cache answers a request (with no upstream call) when it
    was fetched after reading the content tag that is current now, less than the cache's TTL
    ago: tag before data, so it is at least as new as the tag its answer carries. An unknown
    current content tag (nothing stored, the tag cache down) is never served from it. The
    kept data is the requesting user's own: the user is in its key."""
    if stored_content is None or kept_content != stored_content:
        return False
    return now_ms - kept_issued_ms < ttl_ms

"""ETag and 304 of orders/state (docs/protocol.md: Polling orders): an answer's ETag is a
hash of its body, and a poll that names it in If-None-Match gets 304 Not Modified, with no
body. Pure, no I/O."""

from __future__ import annotations

import hashlib
import re

# one member of If-None-Match's list (RFC 9110 §8.8.3, §5.6.1): an optional entity-tag, its
# surrounding whitespace, then a comma or the end; group 1 is the opaque-tag, weakness dropped
_MEMBER = re.compile(r'[ \t]*(?:(?:W/)?("[\x21\x23-\x7e\x80-\xff]*"))?[ \t]*(?:,|\Z)')


def body_etag(body: bytes) -> str:
    """A strong validator of the answer's body: 64 bits of BLAKE2b, quoted. A client holds
    one answer's ETag and compares it with the next answer's, so two bodies of its own are
    confused 1 time in 2**64; more bits would be paid twice on every poll (the ETag and
    If-None-Match cross a mobile network each time, a 304 included)."""
    return f'"{hashlib.blake2b(body, digest_size=8).hexdigest()}"'


def opaque_tags(field_value: str) -> list[str] | None:
    """The opaque-tags an If-None-Match value lists (`W/` dropped: weak comparison looks
    at the opaque-tags only), or None when it is no list of entity-tags (`*` among them)."""
    tags: list[str] = []
    at = 0
    while at < len(field_value):
        member = _MEMBER.match(field_value, at)
        if member is None or member.end() == at:
            return None
        if member.group(1) is not None:
            tags.append(member.group(1))
        at = member.end()
    return tags


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """The client holds this answer already: an entity-tag `If-None-Match` lists matches
    `etag` by weak comparison, as RFC 9110 says; a gateway that compresses the answer hands
    the client `W/"…"`, which must still match.

    `*` never matches: it asks for any current representation, and a poll has none (each
    answer is computed for the poll). A value that is not a list of entity-tags is ignored,
    as if not sent: the answer in full is never wrong."""
    listed = opaque_tags(if_none_match or "")
    return listed is not None and etag.removeprefix("W/") in listed

"""Part endpoints' decisions (docs/protocol.md: Part endpoints). Pure, no I/O."""

from __future__ import annotations

from shared.protocol.tags import upstream_content_tags


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

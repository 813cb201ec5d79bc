"""docs/protocol.md: Part endpoints: a part the app already holds costs no upstream call."""

from __future__ import annotations

from shared.protocol.parts import part_unchanged
from shared.protocol.tags import encode_tag

V = "646d451553"
NOW = 1_800_000_000_000


def held(content: str | None, *, version: str = V, degraded: bool = False) -> str:
    return encode_tag(version, content, NOW - 30_000, degraded=degraded)


def unchanged(tag: str | None, stored: str | None, owner: str | None = "u1") -> bool:
    return part_unchanged(tag, V, stored, owner=owner, user_id="u1", now_ms=NOW)


def test_a_valid_tag_whose_content_is_still_stored_is_unchanged():
    assert unchanged(held("v17"), "v17")


def test_a_tag_whose_content_changed_is_not():
    assert not unchanged(held("v16"), "v17")


def test_no_tag_an_invalid_one_or_one_of_another_policy_version_is_not():
    assert not unchanged(None, "v17")
    assert not unchanged("garbage", "v17")
    assert not unchanged(held("v17", version="0123456789"), "v17")


def test_a_tag_issued_while_the_tag_cache_was_down_says_no_content_and_is_not():
    assert not unchanged(held(None, degraded=True), "v17")


def test_nothing_stored_is_not_unchanged():
    assert not unchanged(held("v17"), None)


def test_another_users_order_or_one_whose_owner_is_unknown_is_asked_of_its_upstream():
    assert not unchanged(held("v17"), "v17", owner="u2")
    assert not unchanged(held("v17"), "v17", owner=None)

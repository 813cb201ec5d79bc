"""docs/protocol.md: Part endpoints: a part the app already holds costs no upstream call."""

from __future__ import annotations

from shared.protocol.parts import kept_part_serves, part_unchanged, upstream_params_digest
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


# -- the shared part cache (stage 4): what a kept part is keyed by, and when it answers

HEADERS = {"Accept-Language": "ru-RU", "User-Agent": "app/5.1", "X-Yandex-UID": "u1"}
FIELDS = {"format_currency": True, "position": {"point": [37.5, 55.7], "dx": 10}}


def test_the_request_id_and_the_user_id_are_not_parameters_of_the_question():
    digest = upstream_params_digest(FIELDS, {**HEADERS, "X-Request-Id": "r1"})
    assert digest == upstream_params_digest(FIELDS, {**HEADERS, "X-Request-Id": "r2"})
    # the user is in the kept part's key on its own
    assert digest == upstream_params_digest(FIELDS, {**HEADERS, "X-Yandex-UID": "u2"})


def test_a_forwarded_header_or_a_body_field_that_reaches_the_upstream_is_one():
    digest = upstream_params_digest(FIELDS, HEADERS)
    assert digest != upstream_params_digest(FIELDS, {**HEADERS, "Accept-Language": "en-US"})
    assert digest != upstream_params_digest(FIELDS, {**HEADERS, "User-Agent": "app/5.2"})
    assert digest != upstream_params_digest({**FIELDS, "format_currency": False}, HEADERS)
    assert digest != upstream_params_digest({**FIELDS, "supported": ["x"]}, HEADERS)
    without = {name: value for name, value in HEADERS.items() if name != "Accept-Language"}
    assert digest != upstream_params_digest(FIELDS, without)


def test_what_is_set_per_call_or_only_spelled_differently_is_not():
    digest = upstream_params_digest(FIELDS, HEADERS)
    # the order id and the content tags are set per call (the order and its content tag
    # are in the key on their own)
    per_call = {**FIELDS, "orderid": "o9", "tags": {"fast_info": "v1"}, "at_least": {}}
    assert digest == upstream_params_digest(per_call, HEADERS)
    reordered = dict(reversed(list(FIELDS.items())))
    lowered = {name.lower(): value for name, value in HEADERS.items()}
    assert digest == upstream_params_digest(reordered, lowered)


def serves(kept: str, stored: str | None, age_ms: int = 1_000) -> bool:
    return kept_part_serves(kept, NOW - age_ms, stored, now_ms=NOW, ttl_ms=60_000)


def test_kept_data_answers_under_the_content_tag_current_now_within_the_ttl():
    assert serves("v17", "v17")
    assert serves("v17", "v17", age_ms=59_999)


def test_a_changed_content_tag_an_unknown_one_or_an_entry_past_the_ttl_does_not():
    assert not serves("v16", "v17")
    assert not serves("v17", None)
    assert not serves("v17", "v17", age_ms=60_000)

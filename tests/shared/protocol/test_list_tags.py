"""docs/protocol.md: List tags, and A just-created order the source does not list yet."""

from __future__ import annotations

from shared.protocol.list_tags import kept_answer_usable, within_created_grace

NOW = 1_800_000_000_000
MAX_AGE = 30_000


def usable(current: str | None, kept: str | None, age_ms: int | None) -> bool:
    kept_at = None if age_ms is None else NOW - age_ms
    return kept_answer_usable(current, kept, kept_at, now_ms=NOW, max_age_ms=MAX_AGE)


def test_an_answer_kept_under_the_current_list_tag_stands_for_the_source():
    assert usable("t1", "t1", 5_000)


def test_a_list_tag_changed_since_the_answer_was_kept_asks_the_source():
    assert not usable("t2", "t1", 5_000)


def test_an_answer_older_than_list_max_age_asks_the_source():
    assert usable("t1", "t1", MAX_AGE - 1)
    assert not usable("t1", "t1", MAX_AGE)


def test_no_kept_answer_or_no_list_tag_asks_the_source():
    assert not usable("t1", None, None)
    assert not usable(None, "t1", 5_000)


def test_an_answer_kept_in_the_future_is_not_trusted():
    assert not usable("t1", "t1", -1_000)


def test_a_known_order_whose_tags_are_younger_than_the_grace_stays():
    assert within_created_grace(NOW - 3_000, now_ms=NOW, grace_ms=10_000)


def test_past_the_grace_or_with_no_tags_it_has_finished():
    assert not within_created_grace(NOW - 10_000, now_ms=NOW, grace_ms=10_000)
    assert not within_created_grace(None, now_ms=NOW, grace_ms=10_000)

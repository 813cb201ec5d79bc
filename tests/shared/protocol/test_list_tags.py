"""docs/protocol.md: List tags, and A just-created order the source does not list yet."""

from __future__ import annotations

import random
from collections import Counter

from shared.protocol.list_tags import (
    answer_current,
    kept_answer_max_age_ms,
    kept_answer_usable,
    within_created_grace,
)

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


def test_an_answer_under_the_list_tag_read_before_the_call_is_current():
    assert answer_current("t1", "t1", omits_a_just_created_order=False)


def test_an_answer_of_another_list_tag_lags_and_is_used_for_this_poll_alone():
    # however complete it looks, and also when it omits nothing: the tag it names counts
    assert not answer_current("t2", "t1", omits_a_just_created_order=False)
    assert not answer_current("t2", "t1", omits_a_just_created_order=True)


def test_an_answer_that_names_no_list_tag_is_used_for_this_poll_alone():
    # however complete it looks: a replica that does not say how old its data is may omit a
    # just-created order the asking poll does not know
    assert not answer_current("t1", None, omits_a_just_created_order=False)
    assert not answer_current("t1", None, omits_a_just_created_order=True)


def test_a_source_asked_without_a_list_tag_is_judged_by_the_created_grace_alone():
    # its service does not opt in to list tags (or no tag was read): nothing is kept for it,
    # and its orders get tags made unless it omits a just-created order
    assert answer_current(None, "t9", omits_a_just_created_order=False)
    assert answer_current(None, None, omits_a_just_created_order=False)
    assert not answer_current(None, None, omits_a_just_created_order=True)
    assert not answer_current(None, "t9", omits_a_just_created_order=True)


def test_each_kept_answer_lives_between_three_quarters_and_all_of_list_max_age():
    rng = random.Random(5)
    ages = [kept_answer_max_age_ms(120_000, rng) for _ in range(2000)]
    assert min(ages) >= 90_000 and max(ages) <= 120_000
    # answers kept in the same second expire spread over the quarter, not together
    per_second = Counter(age // 1000 for age in ages)
    assert len(per_second) >= 29
    assert max(per_second.values()) < 3 * len(ages) / 30

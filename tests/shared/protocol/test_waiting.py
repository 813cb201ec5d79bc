"""docs/protocol.md: Waiting poll: what is news, how long a poll may wait, the interval when
shed."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.answer import ActualOrder, StaleOrder
from shared.protocol.waiting import (
    MAX_WAIT_MS,
    has_news,
    longest_poll_s,
    lost_cache_interval_ms,
    shed_interval_ms,
    wait_budget_ms,
)
from shared.wire import OrderKey

O1 = OrderKey("taxi", "o1")
O2 = OrderKey("eats", "e7")


def actual(key: OrderKey, status: str = "driving", need: tuple[str, ...] = ()) -> ActualOrder:
    return ActualOrder(key.orderid, key.service, status, {}, list(need), {})


def test_an_answer_the_client_already_has_is_no_news():
    assert not has_news({O1: "driving", O2: "cooking"}, [actual(O1), actual(O2, "cooking")])


def test_a_policy_version_to_hold_other_than_the_clients_is_news():
    # the client launches again at once, not after a wait
    known = {O1: "driving"}
    assert has_news(known, [actual(O1)], policy_changed=True)


def test_no_orders_known_and_none_answered_is_no_news():
    assert not has_news({}, [])


def test_a_part_in_need_request_is_news():
    assert has_news({O1: "driving"}, [actual(O1, need=("fast_info",))])


def test_a_status_that_differs_from_the_clients_is_news():
    assert has_news({O1: "searching"}, [actual(O1, "driving")])


def test_an_order_the_client_did_not_list_is_news():
    assert has_news({O1: "driving"}, [actual(O1), actual(O2)])


def test_a_known_order_left_out_as_finished_is_news():
    assert has_news({O1: "driving", O2: "cooking"}, [actual(O1)])


def test_any_stale_order_is_news():
    stale = StaleOrder(O1.orderid, O1.service, "driving", {}, [], {})
    assert has_news({O1: "driving"}, [stale])


@given(st.integers(min_value=1, max_value=MAX_WAIT_MS), st.integers())
def test_a_wait_lasts_wait_ms_plus_at_most_a_sixteenth(wait_ms: int, seed: int):
    budget = wait_budget_ms(wait_ms, random.Random(seed))
    assert wait_ms <= budget <= wait_ms + wait_ms / 16


def test_waits_begun_together_end_apart():
    rng = random.Random(7)
    assert len({wait_budget_ms(20_000, rng) for _ in range(20)}) > 1


def test_a_shed_poll_is_told_to_come_back_later_within_the_clamp():
    assert shed_interval_ms(3000, factor=2.0, max_ms=60_000) == 6000
    assert shed_interval_ms(40_000, factor=2.0, max_ms=60_000) == 60_000


def test_the_longest_poll_is_the_longest_wait_with_its_extra_and_a_look_before_and_after():
    # 25 s plus 1/16 is 26.5625 s; each look is a source deadline then a tags deadline
    assert longest_poll_s(0.25, 0.05) == pytest.approx(26.5625 + 2 * 0.3)
    assert longest_poll_s(1.0, 0.05) > longest_poll_s(0.25, 0.05)


def test_polls_answered_as_the_cache_is_lost_come_back_degraded_and_spread_over_the_ttl():
    rng = random.Random(3)
    intervals = [
        lost_cache_interval_ms(3000, degraded_factor=2.0, spread_ms=10_000, max_ms=60_000, rng=rng)
        for _ in range(1000)
    ]
    # degraded (×2) at the least, spread over the degraded min TTL after it
    assert min(intervals) >= 6000
    assert max(intervals) <= 16_000
    # spread: each tenth of the spread gets a share of the returns, none a storm
    counts = [0] * 10
    for interval in intervals:
        counts[min(9, (interval - 6000) // 1000)] += 1
    assert max(counts) < 2 * 1000 / 10


def test_a_lost_cache_interval_stays_within_the_clamp():
    rng = random.Random(1)
    assert (
        lost_cache_interval_ms(
            40_000, degraded_factor=2.0, spread_ms=10_000, max_ms=60_000, rng=rng
        )
        == 60_000
    )

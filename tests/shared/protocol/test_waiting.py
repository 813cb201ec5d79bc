"""docs/protocol.md: Waiting poll: what is news, how long a poll may wait, whether a poll
answers now and why (its verdict, each rule of the section a test), the interval when shed or
answered as Redis was lost."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.answer import ActualOrder, AnsweredOrder, StaleOrder
from shared.protocol.waiting import (
    FIRST_WAIT_FROM,
    KEEP_WAITING,
    MAX_WAIT_MS,
    Answer,
    Moment,
    Verdict,
    WaitCause,
    has_news,
    longest_poll_s,
    lost_cache_interval_ms,
    shed_interval_ms,
    wait_budget_ms,
    waiting_verdict,
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


@given(st.integers(min_value=1, max_value=MAX_WAIT_MS), st.integers())
def test_a_clients_first_wait_here_lasts_from_half_of_wait_ms_to_the_same_end(
    wait_ms: int, seed: int
):
    budget = wait_budget_ms(wait_ms, random.Random(seed), first_here=True)
    assert wait_ms * FIRST_WAIT_FROM <= budget <= wait_ms + wait_ms / 16


def test_first_waits_begun_together_end_over_half_a_wait():
    """Polls a stopping replica answered `shutdown` come back here together: their waits end
    spread over half a wait, not within a sixteenth of it a wait later."""
    rng = random.Random(7)
    first = [wait_budget_ms(20_000, rng, first_here=True) for _ in range(200)]
    usual = [wait_budget_ms(20_000, rng) for _ in range(200)]
    assert max(usual) - min(usual) <= 20_000 / 16
    assert max(first) - min(first) > 20_000 / 2 * 0.9


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


# --- the verdict: answer now (and why) or wait on ---------------------------------------------


@dataclass(frozen=True)
class Looked:
    """One look of the poll as the verdict reads it."""

    orders: list[AnsweredOrder] = field(default_factory=lambda: [actual(O1)])
    policy_changed: bool = False
    cannot_wait: bool = False


KNOWN = {O1: "driving"}
NOTHING_NEW = Looked()
NEWS = Looked([actual(O1, need=("fast_info",))])
# the moments of a held poll, between two looks
HELD = [Moment.HOLDING, Moment.RUNG, Moment.DUE, Moment.ENDED]


def verdict(moment: Moment, look: Looked = NOTHING_NEW, **process: Any) -> Verdict:
    """The verdict of a poll whose client knows O1 driving, in a process that may wait, with
    the tag cache up, not stopping, 10 s of the wait left and room under the caps, unless
    `process` says otherwise."""
    now = {
        "may_wait": True,
        "tag_cache_up": True,
        "shutting_down": False,
        "time_left_s": 10.0,
        "room": True,
    }
    return waiting_verdict(moment, look, KNOWN, **{**now, **process})


def test_an_answer_with_news_comes_at_once():
    assert verdict(Moment.LOOKED, NEWS) == Answer(WaitCause.NEWS)


def test_otherwise_the_server_holds_the_request():
    assert verdict(Moment.LOOKED) is KEEP_WAITING
    assert verdict(Moment.HOLDING) is KEEP_WAITING


def test_a_wake_up_makes_it_look_again():
    assert verdict(Moment.RUNG) is KEEP_WAITING


def test_after_a_wake_up_with_news_it_answers():
    assert verdict(Moment.LOOKED_AGAIN, NEWS) == Answer(WaitCause.WAKEUP)


def test_after_a_wake_up_without_news_it_waits_for_the_time_left():
    assert verdict(Moment.LOOKED_AGAIN, time_left_s=0.5) is KEEP_WAITING


def test_after_a_wake_up_without_news_and_no_time_left_it_answers_timeout():
    assert verdict(Moment.LOOKED_AGAIN, time_left_s=0.0) == Answer(WaitCause.TIMEOUT)


def test_at_the_end_of_its_wait_a_poll_answers_with_its_last_look_and_no_new_look():
    # the client polls again at once: that poll's tags see a change whose wake-up was lost
    assert verdict(Moment.ENDED, time_left_s=0.0) == Answer(WaitCause.TIMEOUT)


def test_a_change_the_min_ttl_holds_back_is_looked_at_when_the_ttl_passes():
    assert verdict(Moment.DUE) is KEEP_WAITING
    assert verdict(Moment.LOOKED_AGAIN, NEWS) == Answer(WaitCause.WAKEUP)


@pytest.mark.parametrize("moment", [Moment.LOOKED, Moment.LOOKED_AGAIN])
def test_no_waiting_while_the_tag_store_or_a_source_is_unavailable_or_lags(moment: Moment):
    # a look the tag store or a source could not serve, or a lagging source's, cannot wait
    assert verdict(moment, Looked(cannot_wait=True)) == Answer(WaitCause.UNAVAILABLE)


@pytest.mark.parametrize("look", [NOTHING_NEW, NEWS])
def test_no_waiting_while_the_pub_sub_connection_is_down(look: Looked):
    assert verdict(Moment.LOOKED, look, may_wait=False) == Answer(WaitCause.UNAVAILABLE)


def test_past_the_caps_a_poll_answers_at_once_shed():
    assert verdict(Moment.LOOKED, room=False) == Answer(WaitCause.SHED)


def test_past_the_caps_news_is_still_news():
    assert verdict(Moment.LOOKED, NEWS, room=False) == Answer(WaitCause.NEWS)


@pytest.mark.parametrize("moment", list(Moment))
@pytest.mark.parametrize("look", [NOTHING_NEW, NEWS, Looked(cannot_wait=True)])
def test_on_sigterm_every_waiting_poll_answers_at_once(moment: Moment, look: Looked):
    assert verdict(moment, look, shutting_down=True) == Answer(WaitCause.SHUTDOWN)


@pytest.mark.parametrize("moment", HELD)
@pytest.mark.parametrize("lost", ["tag_cache_up", "may_wait"])
def test_a_poll_held_when_the_tag_store_or_pub_sub_is_lost_answers_its_last_look(
    moment: Moment, lost: str
):
    # no new look: every held poll asking every source in the same instant would be a burst
    # no old app ever made; the interval of such an answer is spread (lost_cache_interval_ms)
    assert verdict(moment, **{lost: False}) == Answer(WaitCause.UNAVAILABLE, redis_lost=True)


@pytest.mark.parametrize("lost", ["tag_cache_up", "may_wait"])
def test_a_woken_poll_checks_whether_it_may_still_wait_before_it_looks_again(lost: str):
    assert verdict(Moment.RUNG) is KEEP_WAITING
    assert verdict(Moment.RUNG, **{lost: False}) != KEEP_WAITING


def test_a_look_after_a_wake_up_without_news_as_the_tag_store_is_lost_answers_as_held():
    # held again on that look, it is a held poll that lost the tag store
    answer = verdict(Moment.LOOKED_AGAIN, tag_cache_up=False)
    assert answer == Answer(WaitCause.UNAVAILABLE, redis_lost=True)


@pytest.mark.parametrize("moment", HELD)
def test_a_held_poll_answers_as_on_shutdown_when_both_happen(moment: Moment):
    assert verdict(moment, tag_cache_up=False, shutting_down=True) == Answer(WaitCause.SHUTDOWN)

"""docs/protocol.md: Tags and need_request: force "is honoured at most 6 times per order per
minute (config); past that it is treated as absent". docs/protocol.md: Polling interval: "past
the cap of polls in progress, a poll gets 503 with Retry-After at once"."""

from __future__ import annotations

import random

from shared.protocol.admission import AdaptiveLimit, admitted, retry_after_s
from shared.protocol.force import ForceBudget


def test_force_is_honoured_at_most_the_budget_per_order_per_minute() -> None:
    budget = ForceBudget(per_minute=3)
    assert [budget.honour("o1", now_ms=1000 + i) for i in range(5)] == [
        True,
        True,
        True,
        False,
        False,
    ]


def test_each_order_has_its_own_budget() -> None:
    budget = ForceBudget(per_minute=1)
    assert budget.honour("o1", 0) and budget.honour("o2", 0)
    assert not budget.honour("o1", 1)


def test_force_is_honoured_again_a_minute_after_it_was_honoured() -> None:
    budget = ForceBudget(per_minute=2)
    assert budget.honour("o1", 0) and budget.honour("o1", 30_000)
    assert not budget.honour("o1", 59_999)
    assert budget.honour("o1", 60_000)  # the first use left the window
    assert not budget.honour("o1", 60_001)
    assert budget.honour("o1", 90_000)


def test_a_zero_budget_never_honours_force() -> None:
    assert not ForceBudget(per_minute=0).honour("o1", 0)


def test_orders_not_forced_for_a_minute_are_forgotten() -> None:
    budget = ForceBudget(per_minute=2)
    for n in range(100):
        budget.honour(f"o{n}", 0)
    budget.honour("late", 120_000)
    assert len(budget) == 1


def test_a_poll_is_admitted_below_the_cap_and_refused_at_it() -> None:
    assert admitted(in_flight=0, max_in_flight=1)
    assert admitted(in_flight=99, max_in_flight=100)
    assert not admitted(in_flight=100, max_in_flight=100)


def test_retry_after_is_whole_seconds_from_the_base_to_twice_it() -> None:
    rng = random.Random(7)
    values = {retry_after_s(2, rng) for _ in range(200)}
    assert values == {2, 3, 4}


# The cap follows the process's own queue, the event loop's lag (adaptive concurrency).


def limit(**kwargs: float) -> AdaptiveLimit:
    settings: dict = {"min_limit": 20, "max_limit": 2000, "lag_target_ms": 10, "smoothing": 1.0}
    settings.update(kwargs)
    return AdaptiveLimit(**settings)


def test_the_cap_starts_at_its_floor_so_a_burst_at_start_up_is_not_all_admitted() -> None:
    assert limit().cap == 20


def test_with_the_loop_on_time_a_reached_cap_grows_to_the_ceiling_and_no_further() -> None:
    cap = limit()
    seen = [cap.observe(lag_ms=1, peak_in_flight=cap.cap) for _ in range(200)]
    assert seen[0] > 20
    assert seen == sorted(seen)
    assert seen[-1] == 2000


def test_a_cap_that_nothing_reaches_stays_where_it_is() -> None:
    cap = limit()
    cap.observe(lag_ms=1, peak_in_flight=20)
    before = cap.cap
    assert cap.observe(lag_ms=1, peak_in_flight=before - 1) == before


def test_a_lagging_loop_shrinks_the_cap_in_proportion_at_most_by_half_a_sample() -> None:
    cap = limit(min_limit=1)
    for _ in range(100):
        cap.observe(lag_ms=0, peak_in_flight=cap.cap)
    assert cap.cap == 2000
    assert cap.observe(lag_ms=12.5, peak_in_flight=2000) == 1600  # 10 / 12.5 of it
    assert cap.observe(lag_ms=500, peak_in_flight=2000) == 800  # never more than half
    # shrinking however busy the process is: the polls in progress do not hold it up
    assert cap.observe(lag_ms=20, peak_in_flight=5000) == 400


def test_the_cap_never_shrinks_below_its_floor() -> None:
    cap = limit()
    assert [cap.observe(lag_ms=1000, peak_in_flight=0) for _ in range(5)] == [20] * 5


def test_one_pause_does_not_halve_a_smoothed_cap() -> None:
    cap = limit(smoothing=0.3, min_limit=1)
    for _ in range(100):
        cap.observe(lag_ms=0, peak_in_flight=cap.cap)
    cap.observe(lag_ms=20, peak_in_flight=0)  # one 20 ms pause: smoothed to 6 ms
    assert cap.cap == 2000


def test_a_floor_above_the_ceiling_is_the_ceiling() -> None:
    cap = limit(min_limit=20, max_limit=1)
    assert cap.cap == 1
    assert cap.observe(lag_ms=0, peak_in_flight=1) == 1

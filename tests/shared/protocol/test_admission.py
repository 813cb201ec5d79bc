"""docs/protocol.md: Polling interval: "past the cap of polls in progress, a poll gets 503 with
Retry-After at once"; the cap is what the process clears within its latency budget."""

from __future__ import annotations

import random

from shared.protocol.admission import BudgetLimit, admitted, retry_after_s


def test_a_poll_is_admitted_below_the_cap_and_refused_at_it() -> None:
    assert admitted(in_flight=0, max_in_flight=1)
    assert admitted(in_flight=99, max_in_flight=100)
    assert not admitted(in_flight=100, max_in_flight=100)


def test_retry_after_is_whole_seconds_from_the_base_to_twice_it() -> None:
    rng = random.Random(7)
    values = {retry_after_s(2, rng) for _ in range(200)}
    assert values == {2, 3, 4}


# The cap is what the process clears in its latency budget, at the CPU a look costs.


def limit(**kwargs: float) -> BudgetLimit:
    settings: dict = {
        "min_limit": 20,
        "max_limit": 2000,
        "budget_ms": 250,
        "look_cost_ms": 1.0,
        "smoothing": 1.0,
    }
    settings.update(kwargs)
    return BudgetLimit(**settings)


def test_a_cold_process_admits_the_burst_its_starting_estimate_clears_in_the_budget() -> None:
    assert limit().cap == 250  # 250 ms at 1 ms a look, not a floor to climb from


def test_the_cap_is_the_budget_over_the_measured_cost_of_a_look() -> None:
    cap = limit()
    assert cap.observe(cpu_ms=50, wall_ms=250, looks=100, idle=False) == 500  # 0.5 ms a look
    # 5 ms a look: a busy process
    assert cap.observe(cpu_ms=250, wall_ms=250, looks=50, idle=False) == 50


def test_the_process_idle_work_is_not_charged_to_the_looks() -> None:
    cap = limit()
    # idle: 10 % of a core on timers and metrics, no looks
    cap.observe(cpu_ms=25, wall_ms=250, looks=0, idle=True)
    # 25 ms of that window's 75 were idle work: 50 ms for 100 looks
    assert cap.observe(cpu_ms=75, wall_ms=250, looks=100, idle=False) == 500


def test_a_window_of_overload_in_which_no_look_finished_is_not_idle_work() -> None:
    cap = limit()
    cap.observe(cpu_ms=25, wall_ms=250, looks=0, idle=True)  # idle: 10 % of a core
    # a full core, looks in progress that all outlast the window: says nothing of idle work
    cap.observe(cpu_ms=250, wall_ms=250, looks=0, idle=False)
    # so the next window charges its looks all but the idle 10 %: 225 ms for 100 looks
    assert cap.observe(cpu_ms=250, wall_ms=250, looks=100, idle=False) == 111


def test_a_window_with_too_few_looks_moves_nothing() -> None:
    cap = limit()
    assert cap.observe(cpu_ms=200, wall_ms=250, looks=3, idle=False) == 250


def test_the_cap_stays_within_its_bounds() -> None:
    # 50 ms a look: the floor
    assert limit().observe(cpu_ms=1000, wall_ms=250, looks=20, idle=False) == 20
    # free looks: the ceiling
    assert limit().observe(cpu_ms=0, wall_ms=250, looks=1000, idle=False) == 2000
    assert limit(min_limit=20, max_limit=1).cap == 1  # a floor above the ceiling


def test_one_pause_does_not_halve_a_smoothed_cap() -> None:
    cap = limit(smoothing=0.3)
    for _ in range(20):
        cap.observe(cpu_ms=50, wall_ms=250, looks=100, idle=False)
    steady = cap.cap
    cap.observe(cpu_ms=150, wall_ms=250, looks=100, idle=False)  # one window with a 100 ms pause
    assert cap.cap > steady * 0.6


def test_a_burst_lags_the_loop_for_a_moment_and_leaves_the_cap_where_it_was() -> None:
    cap = limit()
    cap.observe_lag(100)  # one sample 100 ms late: smoothed to 10 ms, the target
    assert cap.cap == 250
    for _ in range(30):
        cap.observe_lag(0)
    assert cap.cap == 250


def test_a_lasting_lag_keeps_shrinking_the_cap_until_it_is_gone() -> None:
    cap = limit()
    caps = []
    for _ in range(100):
        caps.append(cap.observe_lag(40))  # the loop 40 ms late, sample after sample
    assert caps == sorted(caps, reverse=True)
    assert caps[-1] == 20  # the floor: the lag never went
    for _ in range(100):  # a second
        cap.observe_lag(0)
    assert 20 < cap.cap < 250  # the share grows back, not at once
    for _ in range(100):
        cap.observe_lag(0)
    assert cap.cap == 250


def test_the_lag_settles_at_its_target_not_above_it() -> None:
    cap = limit(min_limit=1)
    # a loop whose lag is its queue: 1 ms for each 10 looks in progress (at the cap)
    lags = []
    for _ in range(2000):
        lags.append(cap.cap / 10)
        cap.observe_lag(lags[-1])
    settled = lags[-200:]
    assert min(settled) >= 9 and max(settled) <= 11  # the 10 ms target

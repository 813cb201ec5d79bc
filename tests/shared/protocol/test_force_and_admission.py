"""SPEC, rule 5: "force is honoured a bounded number of times per order per minute; beyond
that it is treated as absent". SPEC, Polling interval: "past a hard cap of polls in progress
per process, a poll is answered at once with 503 and Retry-After"."""

from __future__ import annotations

import random

from shared.protocol.admission import admitted, retry_after_s
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

"""The retry budget: retries at most a fixed share of recent calls, with a small floor."""

from __future__ import annotations

from shared.protocol.retry_budget import RetryBudget


def spend(budget: RetryBudget, now: float) -> int:
    """Retries the budget lets out at `now`, asked until it says no."""
    made = 0
    while budget.can_retry(now):
        budget.retry(now)
        made += 1
    return made


def test_retries_are_at_most_the_share_of_calls_in_the_window():
    budget = RetryBudget(ratio=0.2, min_retries=3, window_s=10.0)
    for i in range(100):
        budget.call(i * 0.01)
    assert spend(budget, 1.0) == 20


def test_a_quiet_upstream_still_gets_the_floor_of_retries():
    budget = RetryBudget(ratio=0.2, min_retries=3, window_s=10.0)
    budget.call(0.0)
    assert spend(budget, 0.0) == 3


def test_calls_and_retries_older_than_the_window_no_longer_count():
    budget = RetryBudget(ratio=0.2, min_retries=3, window_s=10.0)
    for _ in range(100):
        budget.call(0.0)
    assert spend(budget, 0.0) == 20
    # ten seconds on, neither the calls nor the retries count: the floor again
    assert spend(budget, 10.0) == 3


def test_clients_retrying_every_failure_add_at_most_the_share_to_the_load():
    budget = RetryBudget(ratio=0.2, min_retries=3, window_s=10.0)
    attempts = 0
    for i in range(1_000):  # a failing upstream, every call wanting its retry
        now = i * 0.05
        budget.call(now)
        attempts += 1
        if budget.can_retry(now):
            budget.retry(now)
            attempts += 1
    assert attempts <= 1_000 * 1.2 + 3

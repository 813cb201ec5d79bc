"""The order-source budget (docs/protocol.md: A fleet, "The order-source budget")."""

from __future__ import annotations

from shared.protocol.source_budget import SourceCallBudget, last_answer_stands


def test_no_budget_lets_every_due_call_go_out():
    budget = SourceCallBudget(0)
    assert all(budget.take(0.0) for _ in range(1000))


def test_at_most_the_budget_goes_out_in_any_five_seconds():
    budget = SourceCallBudget(3)
    assert [budget.take(t) for t in (0.0, 1.0, 2.0, 3.0, 4.9)] == [True, True, True, False, False]
    # the window slides: the call of 0 s leaves it at 5 s, and one more may go out
    assert budget.take(5.0)
    assert not budget.take(5.5)
    assert budget.take(6.0)


def test_a_call_over_the_budget_is_not_counted():
    budget = SourceCallBudget(1)
    assert budget.take(0.0)
    for t in (1.0, 2.0, 3.0, 4.0):
        assert not budget.take(t)
    # refused calls took no room: the one of 0 s alone bounded them
    assert budget.take(5.0)


def test_the_last_answer_stands_in_while_younger_than_list_max_age():
    assert last_answer_stands(1_000, now_ms=120_999, max_age_ms=120_000)
    assert not last_answer_stands(1_000, now_ms=121_000, max_age_ms=120_000)


def test_without_a_last_answer_the_source_is_unavailable():
    assert not last_answer_stands(None, now_ms=0, max_age_ms=120_000)


def test_a_last_answer_from_the_future_does_not_stand_in():
    # a clock stepped back: its age is unknown
    assert not last_answer_stands(10_000, now_ms=5_000, max_age_ms=120_000)

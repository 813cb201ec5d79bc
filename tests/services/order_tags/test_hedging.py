"""Hedged Redis calls: a silent attempt is backed by another, the first answer wins, the
losers are cancelled, and the budget bounds how many more calls Redis gets."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from services.order_tags.hedging import HEDGE_ATTEMPTS, Hedging
from shared.protocol.retry_budget import RetryBudget

# short: the tests wait for the hedge's timer, never for an answer that is due
AFTER_S = 0.005


class Attempts:
    """An operation whose attempts each wait for their own answer (or never get one)."""

    def __init__(self) -> None:
        self.answers: list[asyncio.Future[str]] = []
        self.started = asyncio.Event()

    async def __call__(self) -> str:
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        self.started.set()
        return await answer

    async def nth(self, count: int) -> asyncio.Future[str]:
        """The `count`-th attempt's answer, once it has gone out."""
        while len(self.answers) < count:
            self.started.clear()
            await self.started.wait()
        return self.answers[count - 1]


class Told:
    """What the hedging told of its hedges, and when."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.changed = asyncio.Event()

    def __call__(self, outcome: str) -> None:
        self.events.append(outcome)
        self.changed.set()


def hedging(
    told: Told | None = None,
    *,
    budget: RetryBudget | None = None,
    on_loser: Callable[[], None] = lambda: None,
) -> Hedging:
    return Hedging(
        AFTER_S,
        budget=budget or RetryBudget(ratio=1.0, min_retries=10),
        on_hedge=told or Told(),
        on_loser=on_loser,
    )


async def test_off_runs_once_and_says_what_failed() -> None:
    calls = 0

    async def failing() -> str:
        nonlocal calls
        calls += 1
        raise RedisConnectionError("refused")

    with pytest.raises(RedisConnectionError):
        await Hedging(0.0).run(failing)
    assert calls == 1


async def test_a_silent_attempt_is_backed_and_the_first_answer_wins() -> None:
    told = Told()
    losers = asyncio.Event()
    attempts = Attempts()
    call = asyncio.ensure_future(hedging(told, on_loser=losers.set).run(attempts))
    second = await attempts.nth(2)
    second.set_result("from the hedge")
    assert await call == "from the hedge"
    assert told.events == ["sent"]
    # the silent one is cut short, and the store is told (to open its connection again)
    await losers.wait()
    assert attempts.answers[0].cancelled()


async def test_an_answer_before_the_hedge_sends_nothing_more() -> None:
    told = Told()

    async def at_once() -> str:
        return "answer"

    assert await hedging(told).run(at_once) == "answer"
    assert told.events == []


async def test_a_failed_attempt_is_followed_at_once() -> None:
    # a reset connection fails at once: the next attempt need not wait for the hedge's time
    results: list[BaseException | str] = [RedisConnectionError("reset"), "answer"]

    async def operation() -> str:
        result = results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return result

    # a hedge's time far off: only the failure can start the second attempt
    patient = Hedging(60.0, budget=RetryBudget(ratio=1.0, min_retries=10))
    async with asyncio.timeout(10):
        assert await patient.run(operation) == "answer"


async def test_an_error_redis_answered_is_not_sent_again() -> None:
    calls = 0

    async def refused() -> str:
        nonlocal calls
        calls += 1
        raise ResponseError("too_many_parts 32 1")

    with pytest.raises(ResponseError):
        await hedging().run(refused)
    assert calls == 1


async def test_every_attempt_failing_raises_the_last_failure() -> None:
    calls = 0

    async def failing() -> str:
        nonlocal calls
        calls += 1
        raise RedisConnectionError(f"refused {calls}")

    with pytest.raises(RedisConnectionError, match=f"refused {HEDGE_ATTEMPTS}"):
        await hedging().run(failing)
    assert calls == HEDGE_ATTEMPTS


async def test_a_spent_budget_sends_no_hedge_and_waits_for_the_attempt_out() -> None:
    told = Told()
    attempts = Attempts()
    spent = RetryBudget(ratio=0.0, min_retries=0)
    call = asyncio.ensure_future(hedging(told, budget=spent).run(attempts))
    first = await attempts.nth(1)
    # the hedge's time passes: the budget says no once, and the call goes on waiting
    await told.changed.wait()
    first.set_result("late, but in time")
    assert await call == "late, but in time"
    assert told.events == ["over_budget"]
    assert len(attempts.answers) == 1


async def test_the_callers_deadline_cancels_every_attempt() -> None:
    attempts = Attempts()
    with pytest.raises(TimeoutError):
        # long after the last hedge's time: no attempt beyond the last goes out
        async with asyncio.timeout(AFTER_S * HEDGE_ATTEMPTS * 10):
            await hedging().run(attempts)
    assert len(attempts.answers) == HEDGE_ATTEMPTS
    assert all(answer.cancelled() for answer in attempts.answers)


async def test_a_hedge_that_wins_leaves_the_callers_task_and_deadline_as_they_were() -> None:
    # the first attempt is awaited in the caller's task, and a winning hedge cuts it short
    # by cancelling that task: the cancellation is taken back, the caller goes on uncancelled
    # and its own deadline still works
    attempts = Attempts()

    async def caller() -> str:
        async with asyncio.timeout(10):
            answer = await hedging().run(attempts)
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        await asyncio.sleep(0)  # no cancellation left pending either
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):
                await asyncio.sleep(1)
        return answer

    call = asyncio.ensure_future(caller())
    (await attempts.nth(2)).set_result("from the hedge")
    assert await call == "from the hedge"
    assert attempts.answers[0].cancelled()


async def test_hedges_that_fail_as_another_wins_are_retrieved_and_counted_as_losers() -> None:
    # every attempt out at once (the first silent, three hedges), then one answers and two
    # fail in the same turn, before the caller's task is back: each loser is cut short or
    # read, and the store told, and nothing is left for asyncio to log as never retrieved
    loop = asyncio.get_running_loop()
    unretrieved: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    losers = 0
    all_lost = asyncio.Event()

    def lost() -> None:
        nonlocal losers
        losers += 1
        if losers == HEDGE_ATTEMPTS - 1:
            all_lost.set()

    attempts = Attempts()
    call = asyncio.ensure_future(hedging(on_loser=lost).run(attempts))
    await attempts.nth(HEDGE_ATTEMPTS)
    attempts.answers[1].set_result("from the first hedge")
    for answer in attempts.answers[2:]:
        answer.set_exception(RedisConnectionError("reset"))
    assert await call == "from the first hedge"
    async with asyncio.timeout(5):
        await all_lost.wait()
    gc.collect()
    assert unretrieved == []

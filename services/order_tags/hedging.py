"""Hedged Redis calls: a call with no answer after a short wait is sent once more, on another
connection, and the first answer wins.

On a link that loses packets, a lost request or answer is resent by TCP only after its
retransmit timeout: 200 ms at least on Linux, twice the whole call's deadline (100 ms in
order_tags, 50 ms for the BFF's call of order_tags). So every lost packet was a failed call,
and the BFF's circuit, which opens on a streak of failures, was open most of the time on a
link that loses packets (docs/protocol.md: What a lossy link to Redis costs). A hedge sent
after a few milliseconds of silence costs those calls that wait instead, well inside the
deadline. The hedges are budgeted, so a Redis that is slow for everyone (or a process whose
own event loop is late) is sent a bounded share more, not a multiple of its load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from redis.exceptions import RedisError, ResponseError

from shared.protocol.retry_budget import RetryBudget

T = TypeVar("T")

# a call's attempts at most, the first included, REDIS_HEDGE_AFTER_S apart: four fit in the
# BFF's 50 ms at 10 ms apart. On a lossy link an attempt fails often (a lost packet, or a
# connection opened again after a hedge cut its command short): a fourth attempt degraded
# fewer polls than three (docs/capacity.md: Where the code's numbers come from)
HEDGE_ATTEMPTS = 4
# hedges at most as many as the calls of the last 10 s (and at least HEDGE_BUDGET_MIN). Half
# as many held hedges back in a burst of losses, enough calls failed in a row to open the
# BFF's circuit (docs/capacity.md: Where the code's numbers come from). A Redis slow for
# every call is sent at most twice its load, not four times
HEDGE_BUDGET_RATIO = 1.0
HEDGE_BUDGET_MIN = 10


def _retryable(exc: BaseException) -> bool:
    """A failure another connection may not have: no answer, or a connection's error. An
    error Redis answered with (a script's refusal) would be answered again."""
    if isinstance(exc, ResponseError):
        return False
    return isinstance(exc, RedisError | OSError | TimeoutError)


@dataclass
class Hedging:
    """`after_s`: the silence after which an attempt is backed by another (0: never)."""

    after_s: float
    attempts: int = HEDGE_ATTEMPTS
    budget: RetryBudget = field(
        default_factory=lambda: RetryBudget(HEDGE_BUDGET_RATIO, HEDGE_BUDGET_MIN)
    )
    clock: Callable[[], float] = time.monotonic
    # told of each hedge: "sent", or "over_budget" when the budget kept it back
    on_hedge: Callable[[str], None] = lambda outcome: None
    # told when a losing attempt's cancellation is done: its connection was closed (a
    # command cut short leaves it unusable) and is back in the pool, to be opened again
    on_loser: Callable[[], None] = lambda: None
    # the attempts that lost, until their cancellation is done (a task nobody holds may be
    # collected before it ends)
    _losers: set[asyncio.Future[Any]] = field(default_factory=set)

    async def run(self, operation: Callable[[], Awaitable[T]], *, work_s: float = 0.0) -> T:
        """The first answer of `operation`'s attempts; the last failure when every attempt
        failed. Unbounded in time by itself: the caller's deadline bounds it. `work_s`: what
        the call may take busy, not silent (a large write): a hedge waits that much longer.

        The first attempt is awaited in the caller's task and the hedges start from a timer:
        most calls are answered before the hedge's time, and then cost a timer, not a task
        and an asyncio.wait each. A hedge that answers first cuts the first attempt short by
        cancelling the caller's task (taken back at once, as asyncio.timeout does)."""
        if self.after_s <= 0 or self.attempts <= 1:
            return await operation()
        self.budget.call(self.clock())
        task = asyncio.current_task()
        assert task is not None
        return await _Race(self, operation, task, self.after_s + work_s).run()

    def _may_hedge(self) -> bool:
        now = self.clock()
        if not self.budget.can_retry(now):
            self.on_hedge("over_budget")
            return False
        self.budget.retry(now)
        self.on_hedge("sent")
        return True

    def _forget(self, attempt: asyncio.Future[Any]) -> None:
        self._losers.discard(attempt)
        self.on_loser()
        if not attempt.cancelled():
            # retrieved, so that a loser's failure is not logged as never retrieved
            attempt.exception()


class _Race(Generic[T]):
    """One hedged call: the first attempt, awaited in the caller's `task`, and the hedges,
    each a task started by the timer (silence) or at once when every attempt out failed."""

    def __init__(
        self, hedging: Hedging, operation: Callable[[], Awaitable[T]], task: Any, after_s: float
    ) -> None:
        self.hedging = hedging
        self.after_s = after_s
        self.operation = operation
        self.task: asyncio.Task[Any] = task
        self.loop = asyncio.get_running_loop()
        # the cancellations asked of the caller's task before this call: more after ours
        # were asked by someone else (its deadline), and are not taken back
        self.cancelling = task.cancelling()
        self.hedges: set[asyncio.Future[T]] = set()
        self.started = 1
        # whether another attempt may still go out
        self.hedging_on = True
        self.timer: asyncio.TimerHandle | None = None
        # the first attempt is still awaited in the caller's task
        self.first_out = True
        # the verdict: a hedge's answer, or an error that ends the call
        self.decided = False
        self.result: T | None = None
        self.error: BaseException | None = None
        self.last_error: BaseException | None = None
        # the caller's task was cancelled to cut the first attempt short
        self.interrupted = False
        # set once decided while the first attempt is over
        self.waiter: asyncio.Future[None] | None = None

    async def run(self) -> T:
        self.timer = self.loop.call_later(self.after_s, self._silence)
        try:
            try:
                answer = await self.operation()
            except asyncio.CancelledError:
                if not self.interrupted:
                    raise
                # cut short by a hedge's verdict (its connection closed, as for any loser)
                self.hedging.on_loser()
                if self.task.uncancel() > self.cancelling:
                    raise
                return self._verdict()
            except BaseException as error:
                if self.interrupted:
                    # the first attempt failed as it was cut short: the verdict stands
                    self.hedging.on_loser()
                    if self.task.uncancel() > self.cancelling:
                        # the caller's own deadline fired in the same turn: it wins
                        raise asyncio.CancelledError from error
                    return self._verdict()
                if not _retryable(error):
                    raise
                self.last_error = error
            else:
                # answered anyway, just as a hedge did: the cancellation is taken back,
                # unless the caller's own deadline fired in the same turn
                if self.interrupted and self.task.uncancel() > self.cancelling:
                    raise asyncio.CancelledError
                return answer
            self.first_out = False
            if not self.decided and not self.hedges:
                self._next_at_once()
            if not self.decided:
                self.waiter = self.loop.create_future()
                await self.waiter
            return self._verdict()
        finally:
            if self.timer is not None:
                self.timer.cancel()
            self.decided = True
            for hedge in self.hedges:
                hedge.cancel()
                self.hedging._losers.add(hedge)
                hedge.add_done_callback(self.hedging._forget)

    def _verdict(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]

    def _silence(self) -> None:
        """The hedge's time passed with no answer: one more attempt, if the budget allows."""
        self.timer = None
        if self.decided or not self.hedging_on:
            return
        if not self.hedging._may_hedge():
            self.hedging_on = False
            return
        self._start()

    def _start(self) -> None:
        hedge = asyncio.ensure_future(self.operation())
        self.hedges.add(hedge)
        hedge.add_done_callback(self._hedge_done)
        self.started += 1
        self.hedging_on = self.started < self.hedging.attempts
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_later(self.after_s, self._silence) if self.hedging_on else None

    def _next_at_once(self) -> None:
        """Every attempt out has failed (a reset connection): the next goes now, or the call
        ends with the last failure."""
        if self.hedging_on and self.hedging._may_hedge():
            self._start()
            return
        self.hedging_on = False
        self._decide(None, self.last_error)

    def _hedge_done(self, hedge: asyncio.Future[T]) -> None:
        self.hedges.discard(hedge)
        if self.decided:
            # a loser that ended before the caller's task came back to forget the rest: it
            # is forgotten here, or its failure is logged as never retrieved
            self.hedging._forget(hedge)
            return
        error = hedge.exception()
        if error is None:
            self._decide(hedge.result(), None)
        elif not _retryable(error):
            self._decide(None, error)
        else:
            self.last_error = error
            if not self.first_out and not self.hedges:
                self._next_at_once()

    def _decide(self, result: T | None, error: BaseException | None) -> None:
        self.decided = True
        self.result, self.error = result, error
        if self.first_out:
            self.interrupted = True
            self.task.cancel()
        elif self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

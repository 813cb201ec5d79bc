"""Hedged Redis calls: a call with no answer after a short wait is sent once more, on another
connection, and the first answer wins.

On a link that loses packets, a lost request or answer is resent by TCP only after its
retransmit timeout: 200 ms at least on Linux, twice the whole call's deadline (100 ms in
order_tags, 50 ms for the BFF's call of order_tags). So every lost packet was a failed call:
at one packet lost in ten, about one call in five, and the BFF's circuit, which opens on a
streak of failures, was open most of the time (benchmarks/redis_packet_loss.py). A hedge sent
after a few milliseconds of silence costs those calls that wait instead, well inside the
deadline. The hedges are budgeted, so a Redis that is slow for everyone (or a process whose
own event loop is late) is sent a bounded share more, not a multiple of its load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redis.exceptions import RedisError, ResponseError

from shared.protocol.retry_budget import RetryBudget

T = TypeVar("T")

# a call's attempts at most, the first included, REDIS_HEDGE_AFTER_S apart: four fit in the
# BFF's 50 ms at 10 ms apart. Measured with one packet in ten lost both ways
# (benchmarks/redis_packet_loss.py): an attempt failed about one time in three (a lost packet,
# or a connection opened again after a hedge cut its command short); with three attempts
# 3-3.5 % of the polls degraded, with four 1-2 %
HEDGE_ATTEMPTS = 4
# hedges at most as many as the calls of the last 10 s (and at least HEDGE_BUDGET_MIN). That
# loss took 0.38-0.46 hedges per call; allowed half as many, the hedges held back in a burst
# failed enough calls in a row to open the BFF's circuit in one run of four (23 % of the polls
# degraded). A Redis slow for every call is sent at most twice its load, not four times
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

    async def run(self, operation: Callable[[], Awaitable[T]]) -> T:
        """The first answer of `operation`'s attempts; the last failure when every attempt
        failed. Unbounded in time by itself: the caller's deadline bounds it."""
        if self.after_s <= 0 or self.attempts <= 1:
            return await operation()
        self.budget.call(self.clock())
        loop = asyncio.get_running_loop()
        pending: set[asyncio.Future[T]] = {asyncio.ensure_future(operation())}
        started = 1
        next_at = loop.time() + self.after_s
        # whether another attempt may still go out
        hedging = True
        last_error: BaseException | None = None
        try:
            while True:
                if pending:
                    timeout = max(0.0, next_at - loop.time()) if hedging else None
                    done, pending = await asyncio.wait(
                        pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                    for attempt in done:
                        error = attempt.exception()
                        if error is None:
                            return attempt.result()
                        if not _retryable(error):
                            raise error
                        last_error = error
                    if pending and (done or not hedging):
                        # a failure while another attempt is out: that one may still answer
                        # (and the next hedge keeps its time)
                        continue
                # silence until the hedge's time, or every attempt out has failed (a reset
                # connection: the next goes at once)
                if not hedging or not self._may_hedge():
                    hedging = False
                    if not pending:
                        assert last_error is not None
                        raise last_error
                    continue
                pending.add(asyncio.ensure_future(operation()))
                started += 1
                next_at = loop.time() + self.after_s
                hedging = started < self.attempts
        finally:
            for attempt in pending:
                attempt.cancel()
                self._losers.add(attempt)
                attempt.add_done_callback(self._forget)

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

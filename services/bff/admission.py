"""Admission control's I/O: the polls in progress, the event loop's lag that moves the cap,
and the 503 past it. The decisions are `shared.protocol.admission`'s."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from contextlib import contextmanager

from services.bff.metrics import BffMetrics
from shared.errors import Overloaded
from shared.protocol.admission import AdaptiveLimit, admitted, retry_after_s
from shared.protocol.interval import overload_factor


class Admission:
    def __init__(
        self,
        limit: AdaptiveLimit,
        *,
        overload_in_flight: int,
        overload_max_factor: float,
        retry_after_base_s: int,
        metrics: BffMetrics,
        rng: random.Random,
    ) -> None:
        self.limit = limit
        self.overload_in_flight = overload_in_flight
        self.overload_max_factor = overload_max_factor
        self.retry_after_base_s = retry_after_base_s
        self.metrics = metrics
        self.rng = rng
        self.in_flight = 0
        self._peak_in_flight = 0
        metrics.admission_limit.set(limit.cap)

    def check(self) -> None:
        """Overloaded (503, Retry-After) past the cap: called before a poll's body is read,
        so a shed poll costs the process as little as it can."""
        if admitted(self.in_flight, self.limit.cap):
            return
        self.metrics.polls_shed.inc()
        retry_after = retry_after_s(self.retry_after_base_s, self.rng)
        raise Overloaded(
            f"{self.in_flight} polls in progress; poll again in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )

    @contextmanager
    def look(self, *, admitted: bool = False) -> Iterator[None]:
        """One look at sources and tags in progress, checked against the cap first unless
        the request was `admitted` already: a waiting poll's looks after its first (on a
        wake-up, or when the min TTL lets a change through) are never shed, or one write to
        an order many polls wait on would turn them into 503s."""
        if not admitted:
            self.check()
        self.in_flight += 1
        self._peak_in_flight = max(self._peak_in_flight, self.in_flight)
        self.metrics.polls_in_flight.inc()
        try:
            yield
        finally:
            self.in_flight -= 1
            self.metrics.polls_in_flight.dec()

    def overload(self) -> float:
        """The interval's factor: shedding by interval starts at half the cap (or the
        configured soft limit, if lower), so clients slow down before they meet 503s."""
        soft_limit = max(1, min(self.overload_in_flight, self.limit.cap // 2))
        return overload_factor(self.in_flight, soft_limit, self.overload_max_factor)

    def observe_lag(self, lag_s: float) -> None:
        cap = self.limit.observe(lag_s * 1000, self._peak_in_flight)
        self._peak_in_flight = self.in_flight
        self.metrics.loop_lag.observe(lag_s)
        self.metrics.admission_limit.set(cap)

    async def watch_loop_lag(self, interval_s: float) -> None:
        """Forever: how late a timer of `interval_s` fires is the time the loop's ready work
        took, the process's own queue."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(interval_s)
            self.observe_lag(loop.time() - started - interval_s)

"""Admission control's I/O: the polls in progress, the CPU the process spends on them that
moves the cap, the event loop's lag (a metric), and the 503 past the cap. The decisions are
`shared.protocol.admission`'s."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from services.bff.metrics import BffMetrics
from shared.errors import Overloaded
from shared.protocol.admission import BudgetLimit, admitted, retry_after_s
from shared.protocol.interval import overload_factor

# a quiet process's lag samples are this many times further apart (10 ms -> 100 ms): a burst
# that arrives meanwhile is seen at the next sample, and from then on sampled closely
IDLE_SAMPLE_FACTOR = 10


class Admission:
    def __init__(
        self,
        limit: BudgetLimit,
        *,
        overload_in_flight: int,
        overload_max_factor: float,
        retry_after_base_s: int,
        metrics: BffMetrics,
        rng: random.Random,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self.limit = limit
        self.overload_in_flight = overload_in_flight
        self.overload_max_factor = overload_max_factor
        self.retry_after_base_s = retry_after_base_s
        self.metrics = metrics
        self.rng = rng
        self.cpu_clock = cpu_clock
        self.in_flight = 0
        # looks started and finished since start: the cost windows count theirs
        self.looks_started = 0
        self.looks_done = 0
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
    def admit(self, *, already: bool = False) -> Iterator[None]:
        """One look at sources and tags in progress, checked against the cap first unless
        the request was admitted `already`: a waiting poll's looks after its first (on a
        wake-up, or when the min TTL lets a change through) are never shed, or one write to
        an order many polls wait on would turn them into 503s."""
        if not already:
            self.check()
        self.in_flight += 1
        self.looks_started += 1
        self.metrics.polls_in_flight.inc()
        try:
            yield
        finally:
            self.in_flight -= 1
            self.looks_done += 1
            self.metrics.polls_in_flight.dec()

    def overload(self) -> float:
        """The interval's factor: shedding by interval starts at half the cap (or the
        configured soft limit, if lower), so clients slow down before they meet 503s."""
        soft_limit = max(1, min(self.overload_in_flight, self.limit.cap // 2))
        return overload_factor(self.in_flight, soft_limit, self.overload_max_factor)

    def observe_window(self, *, cpu_s: float, wall_s: float, looks: int, idle: bool) -> None:
        cap = self.limit.observe(cpu_ms=cpu_s * 1000, wall_ms=wall_s * 1000, looks=looks, idle=idle)
        self.metrics.admission_limit.set(cap)
        self.metrics.look_cost.set(self.limit.look_cost_ms / 1000)

    def busy(self) -> bool:
        """Whether the lag needs sampling closely: polls in progress, or a lag (or the cap's
        share it shrank) not yet back to normal, which each sample moves a step."""
        return (
            self.in_flight > 0
            or self.limit.lag_ms > self.limit.lag_target_ms
            or self.limit.lag_scale < 1.0
        )

    async def watch(self, sample_s: float, window_s: float) -> None:
        """Forever: the event loop's lag each `sample_s` (how late a timer fires is the time
        the loop's ready work took), and each `window_s` the CPU the process used and the
        looks it finished: both move the cap. A quiet process (`busy` false) samples
        IDLE_SAMPLE_FACTOR times less often: sampled every `sample_s`, an idle process spent on
        the sampler what a stream of polls costs (docs/capacity.md: Where the code's numbers
        come from)."""
        loop = asyncio.get_running_loop()
        window_started, cpu_started = loop.time(), self.cpu_clock()
        started_before, done_before = self.looks_started, self.looks_done
        while True:
            started = loop.time()
            sleep_s = sample_s if self.busy() else sample_s * IDLE_SAMPLE_FACTOR
            await asyncio.sleep(sleep_s)
            now = loop.time()
            lag = max(0.0, now - started - sleep_s)
            self.metrics.loop_lag.observe(lag)
            self.metrics.admission_limit.set(self.limit.observe_lag(lag * 1000))
            if now - window_started >= window_s:
                cpu = self.cpu_clock()
                self.observe_window(
                    cpu_s=cpu - cpu_started,
                    wall_s=now - window_started,
                    looks=self.looks_done - done_before,
                    # no look started or finished and none in progress: none was, all along
                    idle=(
                        self.in_flight == 0
                        and self.looks_started == started_before
                        and self.looks_done == done_before
                    ),
                )
                window_started, cpu_started = now, cpu
                started_before, done_before = self.looks_started, self.looks_done

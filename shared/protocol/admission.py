"""Admission control (docs/protocol.md: Polling interval): past a hard cap of polls in progress per
process, a poll is answered at once with 503 and Retry-After, so admitted polls stay fast
and never answer "source unavailable" because of the BFF's own queue.

The cap follows the process's own queue (adaptive concurrency, as Envoy's adaptive
concurrency filter and Netflix's concurrency-limits): a fixed number is either far above
what one process serves (and polls queue in its event loop past the sources' deadlines) or
below what a bigger machine serves. The measure of the own queue is the event loop's lag:
how late a timer fires. A slow source does not lag the loop (waiting on it is free), so a
slow or failing upstream never shrinks the cap; that is the breaker's work.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


def admitted(in_flight: int, max_in_flight: int) -> bool:
    """Whether one more poll may start while `in_flight` are in progress."""
    return in_flight < max_in_flight


def retry_after_s(base_s: int, rng: random.Random) -> int:
    """Retry-After in whole seconds (as HTTP has it): from `base_s` to twice it, so clients
    shed together do not all come back in the same second."""
    return rng.randint(base_s, 2 * base_s)


@dataclass
class AdaptiveLimit:
    """The cap of polls in progress, moved by each sample of the event loop's lag.

    - Lag above the target: the process queues its own work; the cap shrinks in proportion
      (target / lag), by at most half a sample, never below `min_limit`.
    - Lag within the target and the cap reached since the last sample: there is room; it
      grows by the square root of itself (fast from a low cap, gentle near a high one),
      never above `max_limit`.
    - Otherwise it stays: a cap that nothing reaches says nothing about the room above it.

    The lag is smoothed (an exponential average) so that one garbage-collector pause does
    not halve the cap.
    """

    min_limit: int
    max_limit: int
    lag_target_ms: float
    smoothing: float = 0.3
    limit: float = field(init=False)
    lag_ms: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.min_limit = max(1, min(self.min_limit, self.max_limit))
        # from the floor up: a burst at start-up is admitted only as fast as the loop keeps up
        self.limit = float(self.min_limit)

    @property
    def cap(self) -> int:
        return int(self.limit)

    def observe(self, lag_ms: float, peak_in_flight: int) -> int:
        """One lag sample and the most polls in progress since the previous one: the cap."""
        self.lag_ms += self.smoothing * (max(0.0, lag_ms) - self.lag_ms)
        if self.lag_ms > self.lag_target_ms:
            shrink = max(0.5, self.lag_target_ms / self.lag_ms)
            self.limit = max(float(self.min_limit), self.limit * shrink)
        elif peak_in_flight >= self.cap:
            self.limit = min(float(self.max_limit), self.limit + max(1.0, math.sqrt(self.limit)))
        return self.cap

"""A retry budget, as Envoy has one: retries at most a fixed share of the calls made in a
recent window (plus a small floor, so a quiet upstream still gets its retries). Clients that
retry on every failure then add at most that share to a failing upstream's load, never
double it. The clock is passed in."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class RetryBudget:
    ratio: float = 0.2
    min_retries: int = 3
    window_s: float = 10.0
    _calls: deque[float] = field(default_factory=deque)
    _retries: deque[float] = field(default_factory=deque)

    def _forget(self, now: float) -> None:
        for times in (self._calls, self._retries):
            while times and now - times[0] >= self.window_s:
                times.popleft()

    def call(self, now: float) -> None:
        """A first attempt went out."""
        self._forget(now)
        self._calls.append(now)

    def can_retry(self, now: float) -> bool:
        """Whether a retry now stays within the budget."""
        self._forget(now)
        return len(self._retries) < max(self.min_retries, self.ratio * len(self._calls))

    def retry(self, now: float) -> None:
        """A retry went out."""
        self._forget(now)
        self._retries.append(now)

"""A circuit breaker with the clock passed in: after `failures_to_open` failures in a row
the circuit opens for `open_s`; then one probe is let through (half-open)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CircuitBreaker:
    failures_to_open: int = 5
    open_s: float = 2.0
    _failures: int = 0
    _opened_at: float | None = None
    _probing: bool = False

    def allow(self, now: float) -> bool:
        """Whether a call may go out now."""
        if self._opened_at is None:
            return True
        if now - self._opened_at < self.open_s or self._probing:
            return False
        self._probing = True  # half-open: this call is the probe
        return True

    def success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def failure(self, now: float) -> None:
        self._failures += 1
        if self._probing or self._failures >= self.failures_to_open:
            self._opened_at = now
            self._probing = False

    def abandon(self) -> None:
        """A call ended with no verdict (cancelled): a probe may go out again."""
        self._probing = False

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    @property
    def probing(self) -> bool:
        """A probe is out: its verdict opens the circuit again or closes it."""
        return self._probing

"""A budget of order-source calls per process (docs/protocol.md: A fleet, "The order-source
budget"): at most a fixed number of calls to one source in any window (5 s, the bound's own),
so that a fault that makes every user's source due at once (the tag store down, a flush, the
answers kept together after either expiring together) cannot send the fleet's sources more
than the operator sized for. A call over budget is not made: the process's last answer of
that user stands in while it is younger than `list_max_age` (the age a kept answer may have),
and without one the source is unavailable for that poll, as a failed one is. Pure: the clock
is passed in."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

# the fleet bound's window (docs/protocol.md: A fleet)
BUDGET_WINDOW_S = 5.0


@dataclass
class SourceCallBudget:
    """Calls to one source in the last `window_s`, at most `calls_per_window` (0: no budget,
    every due call is made, as the protocol's rules alone say)."""

    calls_per_window: int = 0
    window_s: float = BUDGET_WINDOW_S
    _calls: deque[float] = field(default_factory=deque)

    def take(self, now: float) -> bool:
        """Whether a call may go out now; if so, it is counted."""
        if self.calls_per_window <= 0:
            return True
        while self._calls and now - self._calls[0] >= self.window_s:
            self._calls.popleft()
        if len(self._calls) >= self.calls_per_window:
            return False
        self._calls.append(now)
        return True


def last_answer_stands(answered_at_ms: int | None, *, now_ms: int, max_age_ms: int) -> bool:
    """A call over budget is answered by the process's last answer of that source for that
    user while it is younger than `list_max_age`: the staleness a kept answer may have (a
    source that failed to bump its list tag is asked again within that age). Older, or none:
    the source is unavailable for this poll."""
    if answered_at_ms is None:
        return False
    return 0 <= now_ms - answered_at_ms < max_age_ms

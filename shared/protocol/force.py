"""`force` is a privilege, not a lever (docs/protocol.md: Tags and need_request, rule 5): it is
honoured a bounded number of times per order per minute; beyond that it is treated as absent, so one
client forcing on every poll cannot make the upstreams fetch an order's parts on every poll."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

WINDOW_MS = 60_000


class ForceBudget:
    """Per process: the times force was honoured for each order in the last minute. Holds
    only orders forced within the last minute (older ones are swept once a minute)."""

    def __init__(self, per_minute: int, window_ms: int = WINDOW_MS) -> None:
        self.per_minute = per_minute
        self.window_ms = window_ms
        self._honoured: dict[Hashable, deque[int]] = {}
        self._next_sweep_ms = 0

    def honour(self, order: Hashable, now_ms: int) -> bool:
        """Whether a poll's force on `order` counts; True uses one of its minute's budget."""
        self._sweep(now_ms)
        times = self._honoured.setdefault(order, deque())
        while times and now_ms - times[0] >= self.window_ms:
            times.popleft()
        if len(times) >= self.per_minute:
            return False
        times.append(now_ms)
        return True

    def __len__(self) -> int:
        return len(self._honoured)

    def _sweep(self, now_ms: int) -> None:
        if now_ms < self._next_sweep_ms:
            return
        self._next_sweep_ms = now_ms + self.window_ms
        self._honoured = {
            order: times
            for order, times in self._honoured.items()
            if times and now_ms - times[-1] < self.window_ms
        }

"""The users whose waiting polls a process has taken lately: a poll of a user it has not is the
first here, and its wait is drawn wider (shared.protocol.waiting.wait_budget_ms)."""

from __future__ import annotations

from collections import OrderedDict


class SeenUsers:
    """At most `max_entries` users, the least recently seen dropped first; a user not seen for
    `forget_after_s` is new again. A user dropped early costs only one shorter wait."""

    def __init__(self, *, max_entries: int, forget_after_s: float) -> None:
        self.max_entries = max_entries
        self.forget_after_s = forget_after_s
        self._seen: OrderedDict[str, float] = OrderedDict()

    def first_here(self, user_id: str, now: float) -> bool:
        """Whether this poll is its user's first here lately; it is seen from now on."""
        seen = self._seen.pop(user_id, None)
        self._seen[user_id] = now
        if len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)
        return seen is None or now - seen > self.forget_after_s

    def __len__(self) -> int:
        return len(self._seen)

"""The emulator's call counters for benchmarks/fleet_load.py, read in threads of their own (the
clients' event loop does not delay them): the totals every 250 ms, and every user's own every
5 s (each user there has one order per service, so a user's document calls are that order's).
Windows of any length are differences of two reads, the nearest to each end."""

from __future__ import annotations

import bisect
import http.client
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from benchmarks.redis_loss import SERVICES
from devtools.loadtest.config import HEAVY_TARGETS, PERFORMER_TARGET

PERIOD_S = 0.25
USERS_EVERY_S = 5.0
# a user's counters: its taxi order's totw, its eats and grocery orders' details, the performer
USER_TARGETS = (*HEAVY_TARGETS, PERFORMER_TARGET)


@dataclass(frozen=True)
class Counts:
    sources: int  # order-source calls, every service
    heavy: int  # documents: totw, eats and grocery details
    performer: int

    def __sub__(self, other: Counts) -> Counts:
        return Counts(
            self.sources - other.sources, self.heavy - other.heavy, self.performer - other.performer
        )


@dataclass(frozen=True)
class PerOrder:
    """Between two reads of every user's counters (about 5 s apart): the most document calls
    of any one order and performer calls of any taxi order; how many orders had more than
    one, and how many of those the script had changed in that time."""

    at: float
    heavy: int = 0
    heavy_order: str = ""
    performer: int = 0
    performer_order: str = ""
    over: int = 0
    over_changed: int = 0

    @property
    def text(self) -> str:
        if not self.heavy and not self.performer:
            return "0, 0"
        heavy = f"{self.heavy} ({self.heavy_order})" if self.heavy else "0"
        performer = f"{self.performer} ({self.performer_order})" if self.performer else "0"
        over = f"; {self.over} above 1, {self.over_changed} changed" if self.over else ""
        return f"{heavy}, {performer}{over}"

    @staticmethod
    def worst(rounds: list[PerOrder]) -> PerOrder:
        if not rounds:
            return PerOrder(0.0)
        heavy = max(rounds, key=lambda r: r.heavy)
        performer = max(rounds, key=lambda r: r.performer)
        return PerOrder(
            heavy.at,
            heavy.heavy,
            heavy.heavy_order,
            performer.performer,
            performer.performer_order,
            sum(r.over for r in rounds),
            sum(r.over_changed for r in rounds),
        )


class _Emulator:
    """One kept-alive connection to the emulator's stats; a new one after any error."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conn: http.client.HTTPConnection | None = None

    def get(self, path: str) -> dict[str, int] | None:
        """The `calls` of /emulator/v1/stats (with a query), None if it did not answer."""
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
            self.conn.request("GET", path)
            response = self.conn.getresponse()
            body = response.read()
            if response.status != 200:
                return None
            calls: dict[str, int] = json.loads(body)["calls"]
            return calls
        except (OSError, ValueError, http.client.HTTPException):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None


class Readings:
    def __init__(self, emulator: str, users: list[str]) -> None:
        self.emulator = emulator
        self.users = users
        self.samples: list[tuple[float, Counts]] = []
        # (when, user → its order counters in USER_TARGETS order)
        self.rounds: list[tuple[float, dict[str, tuple[int, ...]]]] = []
        self._stopped = threading.Event()
        self._threads = [
            threading.Thread(target=self._totals, name="fleet-totals", daemon=True),
            threading.Thread(target=self._per_user, name="fleet-users", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join(10)

    def _every(self, period_s: float, read: Callable[[], None]) -> None:
        next_at = time.perf_counter()
        while not self._stopped.is_set():
            read()
            next_at += period_s
            now = time.perf_counter()
            if next_at < now:
                next_at = now  # behind schedule (a slow read): a new grid from here
            self._stopped.wait(next_at - now)

    def _totals(self) -> None:
        emulator = _Emulator(self.emulator)

        def read() -> None:
            started = time.perf_counter()
            calls = emulator.get("/emulator/v1/stats")
            if calls is not None:
                counts = Counts(
                    sum(int(calls.get(f"source:{s}", 0)) for s in SERVICES),
                    sum(int(calls.get(t, 0)) for t in HEAVY_TARGETS),
                    int(calls.get(PERFORMER_TARGET, 0)),
                )
                self.samples.append(((started + time.perf_counter()) / 2, counts))

        self._every(PERIOD_S, read)

    def _per_user(self) -> None:
        if not self.users:
            return
        emulator = _Emulator(self.emulator)

        def read() -> None:
            started = time.perf_counter()
            got: dict[str, tuple[int, ...]] = {}
            for user in self.users:
                if self._stopped.is_set():
                    return
                calls = emulator.get(f"/emulator/v1/stats?user_id={quote(user)}")
                if calls is not None:
                    got[user] = tuple(int(calls.get(t, 0)) for t in USER_TARGETS)
            self.rounds.append(((started + time.perf_counter()) / 2, got))

        self._every(USERS_EVERY_S, read)

    # --- windows ---------------------------------------------------------------------------

    def _at(self, t: float) -> tuple[float, Counts]:
        """The read nearest to `t`."""
        times = [at for at, _ in self.samples]
        index = bisect.bisect_left(times, t)
        near = [i for i in (index - 1, index) if 0 <= i < len(times)]
        return self.samples[min(near, key=lambda i: abs(times[i] - t))]

    def between(self, start: float, end: float) -> Counts:
        return self._at(end)[1] - self._at(start)[1]

    def tiles(self, start: float, end: float, size: float) -> list[tuple[float, float, Counts]]:
        """Windows of `size` from `start`; the last one shorter if at least a second is left."""
        edges = [start + k * size for k in range(int((end - start) // size) + 1)]
        if end - edges[-1] >= 1.0:
            edges.append(end)
        return [(a, b, self.between(a, b)) for a, b in itertools.pairwise(edges)]

    def sliding(self, start: float, end: float, size: float) -> dict[str, tuple[int, float]]:
        """The most calls of each kind in any window of `size` starting at a read from
        `start` to `end` (when it started): every 5-s window, within a read's 250 ms."""
        worst = {"sources": (0, start), "heavy": (0, start), "performer": (0, start)}
        last = self.samples[-1][0] if self.samples else start
        for at, counts in self.samples:
            if not start - PERIOD_S / 2 <= at < end or at + size > last + PERIOD_S / 2:
                continue
            window = self._at(at + size)[1] - counts
            for kind in worst:
                calls = getattr(window, kind)
                if calls > worst[kind][0]:
                    worst[kind] = (calls, at)
        return worst

    def per_order(
        self, start: float, end: float, changes: list[tuple[float, str, str]]
    ) -> list[PerOrder]:
        """Between each two reads of every user's counters, the first from `start` to `end`.
        `changes`: (when, user, service) of the script's changes."""
        found: list[PerOrder] = []
        for (at, before), (until, after) in itertools.pairwise(self.rounds):
            if not start <= at < end:
                continue
            # a user's counters are read anywhere in a round: a change up to a round's
            # length before it may have been fetched after the first read
            changed = {(u, s) for t, u, s in changes if at - USERS_EVERY_S / 2 <= t < until}
            worst = {"heavy": (0, ""), "performer": (0, "")}
            over = over_changed = 0
            for user, now in after.items():
                then = before.get(user)
                if then is None:
                    continue
                diffs = dict(
                    zip(USER_TARGETS, (b - a for a, b in zip(then, now, strict=True)), strict=True)
                )
                for target, service in zip(HEAVY_TARGETS, SERVICES, strict=True):
                    diff = diffs[target]
                    if diff > worst["heavy"][0]:
                        worst["heavy"] = (diff, f"{user} {service}")
                    if diff > 1:
                        over += 1
                        over_changed += (user, service) in changed
                if diffs[PERFORMER_TARGET] > worst["performer"][0]:
                    worst["performer"] = (diffs[PERFORMER_TARGET], f"{user} taxi")
                if diffs[PERFORMER_TARGET] > 1:
                    over += 1
                    over_changed += (user, "taxi") in changed
            (heavy, heavy_order), (performer, performer_order) = worst.values()
            found.append(
                PerOrder(at, heavy, heavy_order, performer, performer_order, over, over_changed)
            )
        return found

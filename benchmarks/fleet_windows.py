"""The windows of benchmarks/fleet_load.py and its report. The emulator's call counters are
read in threads of their own (the clients' event loop does not delay them): the totals every
250 ms, and every user's own every 5 s (each user there has one order per service, so a user's
document calls are that order's). A window of any length is the difference of two reads, the
nearest to each end."""

from __future__ import annotations

import bisect
import http.client
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from benchmarks.redis_loss import SERVICES, legacy_rate
from devtools.loadtest.config import HEAVY_TARGETS, PERFORMER_TARGET
from devtools.loadtest.measure import SOURCE_CALL_CAUSES, SourceCallCauses

PERIOD_S = 0.25
WINDOW_S = 5.0
USERS_EVERY_S = 5.0
# a user's counters: its taxi order's totw, its eats and grocery orders' details, the performer
USER_TARGETS = (*HEAVY_TARGETS, PERFORMER_TARGET)


@dataclass
class Phase:
    name: str
    what: str
    start: float = 0.0
    end: float = 0.0
    events: list[tuple[float, str]] = field(default_factory=list)
    errors: str = ""
    held: float = 0.0
    changes: dict[str, int] = field(default_factory=dict)


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
    one (legacy gave each at most one in 5 s), and how many more than one plus a fetch for
    each change the script made to it in that time (what the contract pays a change with)."""

    at: float
    heavy: int = 0
    heavy_order: str = ""
    performer: int = 0
    performer_order: str = ""
    over: int = 0
    beyond_changes: int = 0

    @property
    def text(self) -> str:
        if not self.heavy and not self.performer:
            return "0, 0"
        heavy = f"{self.heavy} ({self.heavy_order})" if self.heavy else "0"
        performer = f"{self.performer} ({self.performer_order})" if self.performer else "0"
        over = (
            f"; {self.over} above 1, {self.beyond_changes} above 1 + its changes"
            if self.over
            else ""
        )
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
            sum(r.beyond_changes for r in rounds),
        )


class _Emulator:
    """One kept-alive connection to the emulator's stats; a new one after any error."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conn: http.client.HTTPConnection | None = None

    def get(self, path: str) -> dict[str, Any] | None:
        """/emulator/v1/stats (with a query), None if it did not answer."""
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
            self.conn.request("GET", path)
            response = self.conn.getresponse()
            body = response.read()
            if response.status != 200:
                return None
            stats: dict[str, Any] = json.loads(body)
            return stats
        except (OSError, ValueError, http.client.HTTPException):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None


class Readings:
    def __init__(self, emulator: str, users: list[str], list_max_age_s: float) -> None:
        self.emulator = emulator
        self.users = users
        self.samples: list[tuple[float, Counts]] = []
        # why each source call was made (devtools.loadtest), as counted by each total's read
        self.causes = SourceCallCauses(list_max_age_s)
        self.causes.counting = True
        self.cause_counts: list[Counter[str]] = []
        self.round_lengths: list[float] = []
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
        previous: dict[str, Any] = {"calls": {}}

        def read() -> None:
            nonlocal previous
            started = time.perf_counter()
            stats = emulator.get("/emulator/v1/stats")
            if stats is not None:
                calls = stats["calls"]
                at = (started + time.perf_counter()) / 2
                self.causes.read(previous, stats, at)
                previous = stats
                counts = Counts(
                    sum(int(calls.get(f"source:{s}", 0)) for s in SERVICES),
                    sum(int(calls.get(t, 0)) for t in HEAVY_TARGETS),
                    int(calls.get(PERFORMER_TARGET, 0)),
                )
                self.cause_counts.append(Counter(self.causes.causes))
                self.samples.append((at, counts))

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
                stats = emulator.get(f"/emulator/v1/stats?user_id={quote(user)}")
                if stats is not None:
                    got[user] = tuple(int(stats["calls"].get(t, 0)) for t in USER_TARGETS)
            self.round_lengths.append(time.perf_counter() - started)
            self.rounds.append(((started + time.perf_counter()) / 2, got))

        self._every(USERS_EVERY_S, read)

    # --- windows ---------------------------------------------------------------------------

    def _nearest(self, t: float) -> int:
        """The read nearest to `t`."""
        times = [at for at, _ in self.samples]
        index = bisect.bisect_left(times, t)
        near = [i for i in (index - 1, index) if 0 <= i < len(times)]
        return min(near, key=lambda i: abs(times[i] - t))

    def _at(self, t: float) -> tuple[float, Counts]:
        return self.samples[self._nearest(t)]

    def causes_between(self, start: float, end: float) -> Counter[str]:
        """Why the source calls from `start` to `end` were made."""
        return self.cause_counts[self._nearest(end)] - self.cause_counts[self._nearest(start)]

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
            # a change fetched within a second may be fetched after the user's first read
            changed = Counter((u, s) for t, u, s in changes if at - 1.0 <= t < until)
            worst = {"heavy": (0, ""), "performer": (0, "")}
            over = beyond_changes = 0
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
                        beyond_changes += diff > 1 + changed[user, service]
                if diffs[PERFORMER_TARGET] > worst["performer"][0]:
                    worst["performer"] = (diffs[PERFORMER_TARGET], f"{user} taxi")
                if diffs[PERFORMER_TARGET] > 1:
                    over += 1
                    beyond_changes += diffs[PERFORMER_TARGET] > 1 + changed[user, "taxi"]
            (heavy, heavy_order), (performer, performer_order) = worst.values()
            found.append(
                PerOrder(at, heavy, heavy_order, performer, performer_order, over, beyond_changes)
            )
        return found


# --- the report ------------------------------------------------------------------------------


def report(
    users: int,
    per_order: bool,
    readings: Readings,
    phases: list[Phase],
    changes: list[tuple[float, str, str]],
) -> None:
    legacy_per_s, _ = legacy_rate(users)
    # legacy: a document per order per period; each totw (one order in three) asks the performer
    legacy = Counts(0, round(legacy_per_s * WINDOW_S), round(legacy_per_s * WINDOW_S / 3))
    steady = phases[0]
    steady_calls = readings.between(steady.start, steady.end)
    steady_rate = steady_calls.sources / (steady.end - steady.start)
    source_bound = 2 * steady_rate * WINDOW_S
    print(
        f"\nbounds per 5-s window: order sources {source_bound:.0f} (2x the steady "
        f"{steady_rate:.1f}/s); documents {legacy.heavy}, performer {legacy.performer} (the "
        f"legacy clients); per order 1 document, 1 performer call (legacy, iOS) plus a fetch "
        f"for each change the script made to it then"
    )
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(readings.samples)]
    late = [gap for gap in gaps if gap > 1.5 * PERIOD_S]
    print(
        f"reads: {len(readings.samples)} of the totals, {len(late)} late (the longest gap "
        f"{max(gaps, default=0) * 1000:.0f} ms); {len(readings.rounds)} of every user's, each "
        f"taking up to {max(readings.round_lengths, default=0):.1f} s"
    )
    verdicts: list[str] = []
    for current in phases:
        print(f"\nPhase {current.name}. {current.what}")
        print(
            f"   polls held at its start {current.held:.0f}; changes {current.changes}; "
            f"clients: {current.errors}"
        )
        print("   5-s window from start   sources   documents  performer  per order (doc, perf)")
        rounds = readings.per_order(current.start, current.end, changes)
        for start, end, counts in readings.tiles(current.start, current.end, WINDOW_S):
            worst = PerOrder.worst([r for r in rounds if start <= r.at < end])
            marks = [label for at, label in current.events if start <= at < end]
            print(
                f"   {start - current.start:+6.1f} s{'' if end - start > 4.9 else '~'}"
                f"{counts.sources:>16d}{'*' if counts.sources > source_bound else ' '}"
                f"{counts.heavy:>10d}{'*' if counts.heavy > legacy.heavy else ' '}"
                f"{counts.performer:>10d}{'*' if counts.performer > legacy.performer else ' '}"
                f"   {worst.text}" + (f"   <- {'; '.join(marks)}" if marks else "")
            )
            if counts.sources > source_bound:
                print(f"{'':11s}sources by cause: {causes(readings.causes_between(start, end))}")
        every = causes(readings.causes_between(current.start, current.end))
        print(f"   the phase's source calls by cause: {every}")
        peak = readings.sliding(current.start, current.end, WINDOW_S)
        worst_order = PerOrder.worst(rounds)
        lines = [
            check("sources", peak["sources"], source_bound, current.start),
            check("documents", peak["heavy"], legacy.heavy, current.start),
            check("performer", peak["performer"], legacy.performer, current.start),
        ]
        if per_order:
            met = worst_order.beyond_changes == 0
            lines.append(f"per order: {'met' if met else 'NOT MET'} (max {worst_order.text})")
        met_all = all("NOT MET" not in line for line in lines)
        print(f"   verdict: {'goal met' if met_all else 'goal NOT MET'}")
        for line in lines:
            print(f"     {line}")
        verdicts.append(f"{current.name} {'met' if met_all else 'NOT MET'}")
    print(f"\nverdicts: {', '.join(verdicts)}")


def causes(counts: Counter[str]) -> str:
    """Source calls by why they were made (devtools.loadtest.measure.SourceCallCauses)."""
    return ", ".join(f"{c} {counts[c]}" for c in SOURCE_CALL_CAUSES if counts[c]) or "none"


def check(what: str, peak: tuple[int, float], bound: float, origin: float) -> str:
    calls, at = peak
    over = f", {calls - bound:+.1f} over" if calls > bound else ""
    state = "met" if calls <= bound else "NOT MET"
    return (
        f"{what}: {state} (worst sliding 5-s window {calls} from {at - origin:+.2f} s, "
        f"bound {bound:.1f}{over})"
    )

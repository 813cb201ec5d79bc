"""The windows of benchmarks/fleet_load.py and its report. The emulator's counters (calls and
work, emulator/work.py, per upstream endpoint) are read in threads of their own (the clients'
event loop does not delay them): the totals every 250 ms, and every user's own every 5 s. Each
user has one order per service, so what a user's requests made the priced upstreams do is its
orders': the taxi part services', totw's and taxiroute's the taxi order's, each details
endpoint its service's order's. A window of any length is the difference of two reads, the
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
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import quote, urlsplit

from benchmarks.redis_loss import SERVICES, STATUSES, legacy_rate
from devtools.loadtest.config import HEAVY_TARGETS, PERFORMER_TARGET, priced_target
from devtools.loadtest.measure import SOURCE_CALL_CAUSES, SourceCallCauses
from emulator.documents import TAXI_PART_SERVICES, taxi_part_answer, totw_answer
from emulator.faults import PART_TARGET_PREFIX
from emulator.work import answer_work
from emulator.world import World
from shared.policy import DEFAULT_POLICY_PATH, load_policy
from shared.protocol.need_request import TagTimings

PERIOD_S = 0.25
WINDOW_S = 5.0
USERS_EVERY_S = 5.0
# the field the script changes (fleet_load.Changer): a change costs a fetch of the parts
# holding it
CHANGED_FIELD = "eta"


def order_service(target: str) -> str | None:
    """The service of the order a priced upstream's call was for (a user has one of each);
    None for a generic part upstream, which serves whichever order it is asked for."""
    if target in ("totw", "taxiroute"):
        return "taxi"
    if target.removeprefix(PART_TARGET_PREFIX) in TAXI_PART_SERVICES:
        return "taxi"
    service = target.removesuffix("_details")
    return service if service != target and service in SERVICES else None


# how long after a change its fetch may come: the min TTL (a part fetched less than that ago
# waits for it, docs/protocol.md: need_request rule 5), plus a second for the look that finds
# it and the fetch itself
CHANGE_FETCHED_WITHIN_S = TagTimings().min_ttl_ms / 1000 + 1.0


@dataclass(frozen=True)
class Legacy:
    """What the old polling cost the upstreams, per order of each service in its status here
    (STATUSES): one document's work (a totw document assembled from every part service's
    fields and its own, as the emulator builds it: the sum of its fields' prices), and the
    work of one fetch of the parts a change of CHANGED_FIELD makes the new scheme refetch."""

    document_work: dict[str, int]
    change_work: dict[str, int]

    @staticmethod
    def build(policy_path: str = str(DEFAULT_POLICY_PATH)) -> Legacy:
        world = World()
        policy = load_policy(policy_path)
        document_work: dict[str, int] = {}
        change_work: dict[str, int] = {}
        for service, status in STATUSES.items():
            order, _ = world.create("legacy", service, status)
            document = {"orderid": order.orderid, **order.doc}
            document_work[service] = answer_work(
                totw_answer(document) if service == "taxi" else document
            )
            # what the upstream of each part holding the field answers: a taxi part service
            # its own fields, the details upstream (eats, grocery) the whole document
            change_work[service] = sum(
                answer_work(
                    taxi_part_answer(rule.upstream, document)
                    if rule.upstream in TAXI_PART_SERVICES
                    else document
                )
                for rule in policy.services[service].rules
                if CHANGED_FIELD in rule.fields
            )
        return Legacy(document_work, change_work)

    def window(self, users: int) -> Counts:
        """The legacy clients' upstream load in a 5-s window: a document per order per period
        (redis_loss.legacy_rate), each totw asking the performer once."""
        documents_per_s, _ = legacy_rate(users)
        per_service_s = documents_per_s / len(SERVICES)
        work = per_service_s * sum(self.document_work[s] for s in SERVICES)
        return Counts(
            0,
            round(work * WINDOW_S),
            round(documents_per_s * WINDOW_S),
            round(per_service_s * WINDOW_S),
        )


@dataclass
class Phase:
    name: str
    what: str
    start: float = 0.0
    end: float = 0.0
    events: list[tuple[float, str]] = field(default_factory=list)
    errors: str = ""
    # the BFF replicas' order-source outcomes in the phase (mlutp_order_source_calls), those
    # of a replica killed or restarted meanwhile left out
    source_outcomes: dict[str, int] = field(default_factory=dict)
    held: float = 0.0
    changes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Counts:
    sources: int  # order-source calls, every service
    work: int  # the priced upstreams' work units (devtools.loadtest priced_target)
    heavy: int  # document calls: totw, eats and grocery details
    performer: int  # calls of the performer info service

    def __sub__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


# a user's read: priced upstream → (calls, work) made for the user's requests
UserCounters = dict[str, tuple[int, int]]


@dataclass(frozen=True)
class PerOrder:
    """Between two reads of every user's counters (about 5 s apart): the order the priced
    upstreams did the most work for, by its share of its legacy document's work, and the most
    calls of any one upstream for one order; how many orders were above legacy (legacy gave
    each one document in 5 s: its work, one call of each upstream), and how many above legacy
    plus a fetch for each change the script made to the order then (what the contract pays a
    change with: the work of the parts holding the changed field, a call of each)."""

    at: float
    work: int = 0
    work_legacy: int = 0
    work_order: str = ""
    calls: int = 0
    calls_order: str = ""
    over_work: int = 0
    over_calls: int = 0
    beyond_work: int = 0
    beyond_calls: int = 0

    @property
    def beyond_changes(self) -> int:
        return self.beyond_work + self.beyond_calls

    @property
    def text(self) -> str:
        if not self.work and not self.calls:
            return "0, 0"
        work = f"{self.work}/{self.work_legacy} ({self.work_order})" if self.work else "0"
        calls = f"{self.calls} ({self.calls_order})" if self.calls else "0"
        over = ""
        if self.over_work or self.over_calls:
            over = (
                f"; above legacy {self.over_work} work, {self.over_calls} calls; above it + "
                f"changes {self.beyond_work} work, {self.beyond_calls} calls"
            )
        return f"{work}, {calls}{over}"

    @staticmethod
    def worst(rounds: list[PerOrder]) -> PerOrder:
        if not rounds:
            return PerOrder(0.0)
        work = max(rounds, key=lambda r: r.work / r.work_legacy if r.work_legacy else 0.0)
        calls = max(rounds, key=lambda r: r.calls)
        return PerOrder(
            work.at,
            work.work,
            work.work_legacy,
            work.work_order,
            calls.calls,
            calls.calls_order,
            sum(r.over_work for r in rounds),
            sum(r.over_calls for r in rounds),
            sum(r.beyond_work for r in rounds),
            sum(r.beyond_calls for r in rounds),
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
        # (when, user → its counters)
        self.rounds: list[tuple[float, dict[str, UserCounters]]] = []
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
                    sum(int(units) for t, units in stats["work"].items() if priced_target(t)),
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
            got: dict[str, UserCounters] = {}
            for user in self.users:
                if self._stopped.is_set():
                    return
                stats = emulator.get(f"/emulator/v1/stats?user_id={quote(user)}")
                if stats is not None:
                    calls, work = stats["calls"], stats["work"]
                    got[user] = {
                        t: (int(calls.get(t, 0)), int(work.get(t, 0)))
                        for t in calls.keys() | work.keys()
                        if priced_target(t)
                    }
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
        """The most of each count (calls, work) in any window of `size` starting at a read from
        `start` to `end` (when it started): every 5-s window, within a read's 250 ms."""
        worst = {f.name: (0, start) for f in fields(Counts)}
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
        self, start: float, end: float, changes: list[tuple[float, str, str]], legacy: Legacy
    ) -> list[PerOrder]:
        """Between each two reads of every user's counters, the first from `start` to `end`.
        `changes`: (when, user, service) of the script's changes."""
        found: list[PerOrder] = []
        for (at, before), (until, after) in itertools.pairwise(self.rounds):
            if not start <= at < end:
                continue
            # a change is fetched after the client's next look, and no sooner than the min TTL
            # after the part's last fetch: up to CHANGE_FETCHED_WITHIN_S after it was made, so
            # it may be fetched after the user's first read of this interval
            changed = Counter(
                (u, s) for t, u, s in changes if at - CHANGE_FETCHED_WITHIN_S <= t < until
            )
            worst_work, worst_calls = (0.0, 0, 0, ""), (0, "")
            over_work = over_calls = beyond_work = beyond_calls = 0
            for user, now in after.items():
                then = before.get(user)
                if then is None:
                    continue
                work: Counter[str] = Counter()
                calls: dict[str, tuple[int, str]] = {s: (0, "") for s in SERVICES}
                for target, (target_calls, target_work) in now.items():
                    service = order_service(target)
                    if service is None:
                        continue
                    calls_before, work_before = then.get(target, (0, 0))
                    work[service] += target_work - work_before
                    made = target_calls - calls_before
                    # the route's calls are paced by its own rule (the driver's distance), as
                    # the old apps' route polling was: its work is counted, not its calls
                    if target != "taxiroute" and made > calls[service][0]:
                        calls[service] = (made, target)
                for service in SERVICES:
                    order = f"{user} {service}"
                    document = legacy.document_work[service]
                    allowed = changed[user, service]
                    if work[service] / document > worst_work[0]:
                        worst_work = (work[service] / document, work[service], document, order)
                    over_work += work[service] > document
                    beyond_work += work[service] > document + allowed * legacy.change_work[service]
                    made, target = calls[service]
                    if made > worst_calls[0]:
                        worst_calls = (made, f"{order} {target}")
                    over_calls += made > 1
                    beyond_calls += made > 1 + allowed
            _, work_units, document, work_order = worst_work
            found.append(
                PerOrder(
                    at,
                    work_units,
                    document,
                    work_order,
                    *worst_calls,
                    over_work,
                    over_calls,
                    beyond_work,
                    beyond_calls,
                )
            )
        return found


# --- the report ------------------------------------------------------------------------------


def report(
    users: int,
    per_order: bool,
    readings: Readings,
    phases: list[Phase],
    changes: list[tuple[float, str, str]],
    legacy: Legacy,
) -> None:
    bound = legacy.window(users)
    steady = phases[0]
    steady_calls = readings.between(steady.start, steady.end)
    steady_rate = steady_calls.sources / (steady.end - steady.start)
    source_bound = 2 * steady_rate * WINDOW_S
    # per column of the windows: sources against their steady rate, the rest against legacy
    bounds = {"sources": source_bound, "work": bound.work, "heavy": bound.heavy}
    bounds["performer"] = bound.performer
    documents = ", ".join(f"{s} {w}" for s, w in legacy.document_work.items())
    fetches = ", ".join(f"{s} {w}" for s, w in legacy.change_work.items())
    print(
        f"\nbounds per 5-s window: order sources {source_bound:.0f} (2x the steady "
        f"{steady_rate:.1f}/s); part-upstream work {bound.work} (the legacy clients' documents: "
        f"{documents} units each), beside calls: documents {bound.heavy}, performer "
        f"{bound.performer}; per order its document's work and 1 call of each part service "
        f"(legacy, iOS) plus, for each change the script made to it then, a fetch of the parts "
        f"holding {CHANGED_FIELD} ({fetches} units) and a call"
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
        if current.source_outcomes:
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(current.source_outcomes.items()))
            print(f"   the BFF's source outcomes (replicas running at both ends): {outcomes}")
        print(
            "   5-s window   sources     work  documents performer   per order: work/legacy "
            "(order), calls (order upstream)"
        )
        rounds = readings.per_order(current.start, current.end, changes, legacy)
        for start, end, counts in readings.tiles(current.start, current.end, WINDOW_S):
            worst = PerOrder.worst([r for r in rounds if start <= r.at < end])
            marks = [label for at, label in current.events if start <= at < end]
            columns = "".join(
                f"{getattr(counts, f.name):>{width}d}"
                + ("*" if getattr(counts, f.name) > bounds[f.name] else " ")
                for f, width in zip(fields(Counts), (9, 9, 10, 9), strict=True)
            )
            print(
                f"   {start - current.start:+6.1f} s{'' if end - start > 4.9 else '~'}{columns}"
                f"   {worst.text}" + (f"   <- {'; '.join(marks)}" if marks else "")
            )
            if counts.sources > source_bound:
                print(f"{'':11s}sources by cause: {causes(readings.causes_between(start, end))}")
        every = causes(readings.causes_between(current.start, current.end))
        print(f"   the phase's source calls by cause: {every}")
        peak = readings.sliding(current.start, current.end, WINDOW_S)
        worst_order = PerOrder.worst(rounds)
        names = {"sources": "sources", "work": "part-upstream work", "heavy": "documents"}
        names["performer"] = "performer"
        lines = [check(names[kind], peak[kind], bounds[kind], current.start) for kind in names]
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
    count, at = peak
    over = f", {count - bound:+.1f} over" if count > bound else ""
    state = "met" if count <= bound else "NOT MET"
    return (
        f"{what}: {state} (worst sliding 5-s window {count} from {at - origin:+.2f} s, "
        f"bound {bound:.1f}{over})"
    )

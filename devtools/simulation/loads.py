"""The `load` check, window by window (devtools/simulation/checks.py): calls to the order
sources and heavy parts against the legacy twins and what the contract pays for."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import accumulate

from devtools.simulation.bounds import (
    DEGRADED_TTL_S,
    HEAVY,
    LIST_MAX_AGE_S,
    MIN_TTL_S,
    PART_SERVICES,
    PERFORMER,
    SERVICES,
    WINDOW_S,
)
from devtools.simulation.check_base import CheckerBase
from devtools.simulation.clients import BACKOFF_CAP_S
from devtools.simulation.scenario import MAX_LAG_S, Fault
from devtools.simulation.upstreams import Call
from devtools.simulation.vloop import WALL_EPOCH_S
from shared.wire import OrderKey


class Loads:
    """The load windows. With a handful of users a 5-s window holds a few calls, so each
    client's legacy twin (client/legacy.py, the load tests' baseline: each active order's
    document every 5 s on iOS or 10 s on Android; with no active order, a launch each period,
    asking every source) is counted at its worst phase: a launch and one document per active
    order in any 5 s. Each legacy document call reads its order from the order's source
    (totw is built from order_proc), so it counts as a source call too.

    Added to it, what the contract pays for by its own rules, each counted where it is paid:
    - a list bump that landed, a kept answer that expired: one re-ask, by the next look of
      each client of the user (a race between two polls' keeps may cost one more);
    - the store emptied or back: every source, at the next look of each client;
    - degraded (docs/protocol.md: List tags, "while the tag store is unavailable every queried
      source is asked on every poll"): every source, for each poll a client sends then;
    - a source failing or lagging is asked on every look (its answer is not kept);
    - heavy: for each change of an order's parts, one fetch by each client, after its next
      look (or the one after the min TTL; a change made while the order's source was out, at
      its return, since its orders are answered stale till then): part fetches coalesce
      within a process, and routing by user sends a user's requests to one (two around a
      restart, which moves its users and back); the parts once more after the store lost
      its tags; while a part upstream fails, each client's retries with backoff.
    The bound is the fleet's, all replicas together, whatever their number (docs/protocol.md:
    A fleet): a spraying balancer (Options.spraying_router) that makes each process's memos
    see a share of a user's requests pays more than it, and is found.
    So held polls looking again all at once when Redis is lost, with no poll sent, are paid
    for by nothing: "losing Redis must cost the sources nothing in that instant"."""

    def __init__(self, checker: CheckerBase, calls: Sequence[Call], end_t: float) -> None:
        self.checker = checker
        self.end_t = end_t
        self.replicas = checker.scenario.replicas
        # routing by user: a user's requests meet in one process (its memos and coalescing
        # serve the fleet), but a restart moves its users to another and back, each process
        # with memos of its own: two may serve a user from the restart until a degraded TTL
        # after it is back
        self.moved = [
            (f.start - 1, f.start + f.value + DEGRADED_TTL_S + 5)
            for f in checker.timeline.faults
            if f.kind == "replica_restart"
        ]
        misbehaving = {c.user_id for c in checker.clients.values() if c.misbehaving}
        kept = [call for call in calls if call.user_id not in misbehaving]
        self.sources = sorted(c.t for c in kept if c.target.startswith("source:"))
        self.heavy = sorted(c.t for c in kept if c.target in HEAVY)
        self.performer = sorted(c.t for c in kept if c.target == PERFORMER)
        # every other taxi part service: its own calls (the performer's are above)
        self.part_services = {
            part: sorted(c.t for c in kept if c.target == target)
            for part, target in PART_SERVICES.items()
            if target != PERFORMER
        }
        self.clients = [c for c in checker.clients.values() if not c.misbehaving]
        world = checker.world
        timeline = checker.timeline
        users = sorted({c.user_id for c in self.clients})
        devices = {user: sum(1 for c in self.clients if c.user_id == user) for user in users}
        looks = {user: sorted(checker.look_times.get(user, [])) for user in users}
        self.orders = {
            user: [
                (o.created_t, o.finished_t if o.finished_t is not None else end_t, o.key.service)
                for o in world.by_user.get(user, [])
            ]
            for user in users
        }
        self.finishes = {
            user: sorted(c.data_t for c in world.status_changes if c.finished and c.user_id == user)
            for user in users
        }

        def next_looks(user: str, t: float, count: int) -> list[float]:
            times = looks[user]
            first = bisect.bisect_left(times, t)
            return times[first : first + count]

        # sources: (when paid, how many calls)
        paid: list[tuple[float, float]] = []
        events = [(t, user) for t, _, user in world.list_bumps] + [
            ((r.at_ms + r.max_age_ms) / 1000 - WALL_EPOCH_S, r.user_id)
            for r in checker.store.kept_log
        ]
        for t, user in events:
            if user in looks:
                paid += [(look, 1.0) for look in next_looks(user, t, 2 * devices[user])]
        recovered = [span.end for span in timeline.store] + [
            f.start for f in timeline.faults if f.kind == "flush"
        ]
        for t in recovered:
            for user in users:
                paid += [(look, len(SERVICES)) for look in next_looks(user, t, devices[user])]
        for client in self.clients:
            for sent in checker.polls.get(client.name, []):
                if timeline.store_spans(sent, sent):
                    paid.append((sent, len(SERVICES)))
        for f in timeline.faults:
            if f.kind.startswith("source_"):
                for user in users:
                    times = looks[user]
                    low = bisect.bisect_left(times, f.start)
                    high = bisect.bisect_right(times, f.end + f.value)
                    paid += [(look, 1.0) for look in times[low:high]]
        paid.sort()
        self.paid_sources = [t for t, _ in paid]
        self.paid_sources_sum = [0.0, *accumulate(n for _, n in paid)]

        # heavy: (from, to, calls) — paid after a look in [from, to]
        heavy: list[tuple[float, float, float]] = []
        slow: list[tuple[float, float, float]] = []
        # a taxi part service's: after a bump of its part, a creation, a user change
        served: dict[str, list[tuple[float, float, float]]] = {p: [] for p in self.part_services}
        bumped = {(t, key): parts for t, key, parts in world.part_bumps}
        changes = [(t, world.orders[key], "slow" in parts) for t, key, parts in world.part_bumps]
        changes += [(o.created_t, o, o.key.service == "taxi") for o in world.orders.values()]
        # a user's change is forced until seen, whether its tags were written or not: a
        # forced part whose tag was issued while the store was down is fetched again (rule 3's
        # degraded tags, refetched when forced)
        changes += [
            (c.data_t, world.orders[c.key], c.key.service == "taxi") for c in world.user_changes
        ]
        # a source out (down, slow, lagging): its orders are answered stale, so the parts that
        # changed meanwhile are fetched after its return, paid as a change made at the return
        for f in timeline.faults:
            if not f.kind.startswith("source_"):
                continue
            back = f.end + f.value
            stale: dict[OrderKey, set[str]] = {}
            for t, key, written in world.part_bumps:
                if key.service == f.target and f.start <= t <= back:
                    stale.setdefault(key, set()).update(written)
            for key, changed in stale.items():
                bumped[(back, key)] = tuple(sorted(changed))
                changes.append((back, world.orders[key], "slow" in changed))
        for t, order, performer in changes:
            user = order.user_id
            if user not in looks:
                continue
            first = next_looks(user, t, 1)
            due = next_looks(user, t + MIN_TTL_S, 1)
            if not first:
                continue
            span = (first[0] - 1, (due[0] if due else first[0]) + 1)
            heavy.append((*span, float(self._reach(*span) * devices[user])))
            if performer:
                slow.append((*span, float(devices[user])))
            if order.key.service == "taxi":
                parts = bumped.get((t, order.key))
                for part, spans in served.items():
                    if parts is None or part in parts:
                        spans.append((*span, float(self._reach(*span) * devices[user])))
        for t in recovered:
            for user in users:
                for made, service in self._made_again(t, timeline.faults):
                    at = [(a, b, svc) for a, b, svc in self.orders[user] if a <= t < b]
                    active = sum(1 for *_, svc in at if service is None or svc == service)
                    taxi = sum(1 for *_, svc in at if svc == "taxi" and service in (None, "taxi"))
                    span = (made, made + DEGRADED_TTL_S + 30)
                    heavy.append((*span, float(active * devices[user])))
                    slow.append((*span, float(taxi * devices[user])))
                    for spans in served.values():
                        spans.append((*span, float(taxi * devices[user])))
        self.paid_heavy = heavy
        self.paid_served = served
        self.paid_slow = slow
        # a finished order still listed: by a kept answer up to list_max_age when its list
        # bump was lost, by a lagging replica for its lag; each poll of a client then fetches
        # its parts (404: expired)
        self.unbumped = (
            [
                (c.data_t, c.data_t + LIST_MAX_AGE_S + 2, c.user_id, c.key.service)
                for c in world.status_changes
                if c.finished and c.list_bump_t is None
            ]
            + [
                # a bump the store refused lands when the writers retry it, up to their backoff
                # cap after the store is back: an answer kept before the outage stands till then
                (c.data_t, c.list_bump_t + 2, c.user_id, c.key.service)
                for c in world.status_changes
                if c.finished and c.list_bump_t is not None and c.list_bump_t > c.data_t + 0.5
            ]
            + [
                (c.data_t, c.data_t + lag + 1, c.user_id, c.key.service)
                for c in world.status_changes
                if c.finished
                # a lag that begins after the finish still serves the list from before it
                for lag in (timeline.lag_at(c.key.service, c.data_t, c.data_t + MAX_LAG_S),)
                if lag
            ]
        )
        self.degraded = [(s.start, s.end + DEGRADED_TTL_S) for s in timeline.store]
        self.upstream_faults = [
            (f.start, f.end + BACKOFF_CAP_S)
            for f in timeline.faults
            if f.kind.startswith("upstream_")
        ]

    def _reach(self, start: float, end: float) -> int:
        """How many processes may serve one user's requests within [start, end]: the
        fleet's bound does not grow with its size (docs/protocol.md: A fleet)."""
        moving = any(a < end and start < b for a, b in self.moved)
        return min(self.replicas, 2 if moving else 1)

    @staticmethod
    def _made_again(t: float, faults: Sequence[Fault]) -> list[tuple[float, str | None]]:
        """When the tags a store lost at `t` are made again, and for which service's orders
        (None: every service's): at once, and for a service whose source is out at `t`, at its
        return too (an order's tags are made only from its source's current answer), whose
        parts are then refetched over the degraded TTL as after any loss."""
        made: list[tuple[float, str | None]] = [(t, None)]
        for f in faults:
            if f.kind.startswith("source_") and f.start <= t <= f.end + f.value:
                made.append((f.end + f.value, f.target))
        return made

    @staticmethod
    def _count(times: list[float], start: float, end: float) -> int:
        return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)

    @staticmethod
    def _overlap(a: float, b: float, start: float, end: float) -> float:
        return max(0.0, min(b, end) - max(a, start))

    def check(self) -> None:
        starts = [float(k) for k in range(int(self.end_t - WINDOW_S) + 1)]
        for edge in self.checker.timeline.edges():
            starts += [edge - WINDOW_S + 0.5, edge - 0.5]
        for start in sorted(set(starts)):
            if start < 0 or start + WINDOW_S > self.end_t:
                continue
            if self._window(start, start + WINDOW_S):
                return

    def _window(self, start: float, end: float) -> bool:
        legacy_sources = legacy_heavy = legacy_totw = 0.0
        allow_heavy = allow_performer = allow_taxi = 0.0
        # a look begun just before the window asks its sources within it
        low = bisect.bisect_left(self.paid_sources, start - 1)
        high = bisect.bisect_left(self.paid_sources, end)
        allow_sources = self.paid_sources_sum[high] - self.paid_sources_sum[low]
        allow_heavy += sum(n for a, b, n in self.paid_heavy if a < end and start <= b)
        allow_performer += sum(n for a, b, n in self.paid_slow if a < end and start <= b)
        degraded = any(a < end and start < b for a, b in self.degraded)
        failing_parts = any(a < end and start < b for a, b in self.upstream_faults)
        reach = self._reach(start, end)
        for client in self.clients:
            if client.start_t >= end:
                continue
            user = client.user_id
            since = max(start, client.start_t)
            orders = [(a, b, svc) for a, b, svc in self.orders[user] if a < end and b > since]
            # the twin asks for an order's document once more after it finished: the 404
            # that tells it so comes within its period
            polled = [
                (a, b, svc)
                for a, b, svc in self.orders[user]
                if a < end and b + client.legacy_period_s > since
            ]
            active = len(polled)
            taxi = sum(1 for *_, service in polled if service == "taxi")
            covered = sum(self._overlap(a, b, since, end) for a, b, _ in orders)
            idle = not orders or covered < (end - since) * len(orders) - 1e-9
            # the legacy twin at its worst phase: each active order's document (which reads
            # the order from its source), and a launch (every source) when it has none, at
            # its start and after an order of it finished
            legacy_heavy += active
            legacy_totw += taxi
            legacy_sources += active + (len(SERVICES) if idle else 0)
            # its launch at start (the new client's launch asks a moment later: the network)
            if start - 1 < client.start_t < end:
                legacy_sources += len(SERVICES)
            legacy_sources += len(SERVICES) * self._count(self.finishes[user], start, end)
            for a, b, owner, service in self.unbumped:
                if owner == user and a < end and start < b:
                    allow_heavy += 2
                    allow_performer += 2 if service == "taxi" else 0
                    allow_taxi += 2 if service == "taxi" else 0
            if degraded:
                # the degraded memo is per process: one call per order and process that
                # serves the user in a degraded TTL (one, but for a restart's move)
                allow_heavy += (reach - 1) * active
                allow_performer += (reach - 1) * taxi
                allow_taxi += (reach - 1) * taxi
            # a part upstream failing: each failed part is retried by the client with backoff
            # (1 s, then 2, then 4: three tries in 5 s) and each try by the BFF once; in a
            # fleet the BFF's breaker caps this (ten failures, then a probe each 2 s), which
            # a handful of orders never reach
            if failing_parts:
                allow_heavy += 6 * active
                allow_performer += 6 * taxi
                allow_taxi += 6 * taxi
        return any(
            (
                self._over("sources", self.sources, start, end, legacy_sources, allow_sources),
                self._over("heavy", self.heavy, start, end, legacy_heavy, allow_heavy),
                self._over("performer", self.performer, start, end, legacy_totw, allow_performer),
                *(
                    self._over(
                        PART_SERVICES[part],
                        times,
                        start,
                        end,
                        legacy_totw,
                        allow_taxi
                        + sum(n for a, b, n in self.paid_served[part] if a < end and start <= b),
                    )
                    for part, times in self.part_services.items()
                ),
            )
        )

    def _over(
        self, what: str, times: list[float], start: float, end: float, legacy: float, allowed: float
    ) -> bool:
        calls = self._count(times, start, end)
        if calls <= legacy + allowed:
            return False
        self.checker.violation(
            start,
            "load",
            f"{calls} {what} calls in [{start:.2f}, {end:.2f}): legacy twins at their worst "
            f"phase {legacy:.1f}, and the contract's allowances {allowed:.1f}",
        )
        return True

"""The invariants, checked on every answer, every look and every window of a run.

Answer by answer (each poll's answer as the server gives it):
- `crossing`: no order of another user is ever answered actual; a stale order is only what
  the client sent; no part data of another user's order, nor data an upstream served to
  another user (by the stamp each part upstream puts in every part: whom it served the
  document to; devtools/simulation/documents.py), also when the shared part cache answers;
  no poll is held listening on, or is woken by, another user's channel; no tags are made
  naming another user as an order's owner.
- `behind_tag`: no part is answered with data older than the content tag its tag carries:
  its stamp's revision (the order's document changes its upstream had seen) is at least the
  order's revision when that content tag was first written (tag before data: a fetch after
  reading the tag sees every change made before its write), whether the upstream, a memo
  or the shared part cache answered it.
- `vanished`: a known order that is active throughout the poll is never absent from its
  answer. This holds the created grace and more: a known order within its grace is never
  absent, and past it a lagging source cannot make it vanish either. The contract's own
  exceptions: its creation's tag writes never landed (a kept answer from before it stands
  for the source up to `list_max_age`; with no tags, no grace), or nothing can say it is
  within its grace (the tag store unavailable or emptied) while a replica lags behind it.
- `order`: the orders of an answer come in canonical order (created_at, service, orderid),
  stale ones placed by the created_at their client echoed: so a list keeps its order before,
  during and after its service's outage.
- `deadline`: a poll is answered within one look (a waiting poll: its wait, its extra, and
  two looks), also when its process stops.

Look by look:
- `finished`: a finished or cancelled order is never answered actual by a look that began
  after its list bump landed, nor `list_max_age` after it finished (a lost bump: the kept
  answer may stand that long), unless a lagging replica still listed it.
- `force`: an owner's `force` on its own order, within its budget (6 a minute per order and
  user), makes every changed part needed (rule 5).
- `lost_redis`: a held poll never looks again once its process knows the tag cache or its
  pub/sub connection is lost: it answers with its last look ("losing Redis must cost the
  sources nothing in that instant").
- `watch_cache`: a poll held from its client's last look with no new look (docs/protocol.md:
  Waiting poll) misses nothing a fresh look at that moment would have answered as news,
  unless a message on one of its channels was lost since that look (a lost wake-up: the
  next full look, within 0.75 × list_max_age, sees it).

Client by client, as it goes:
- `backwards`: no actual answer takes an order back in its lifecycle from a status its client
  was already answered actual (nor, per answer, below the version its client echoed).

Client by client, after the run:
- `fresh`: a status change is seen within one interval (one wait for a waiting client) of its
  list tag's write, counted no later than the writers' bound (at once; with the store refusing
  writes, its return and the writers' backoff cap; a dead writer's return): a write lost or
  late leaves the change hidden, and is found; its part (the data version) within the min
  TTL and one interval; a finished order is gone from the client within one interval of its
  bump, or `list_max_age` and one interval without it. When the tag store was unavailable or emptied
  meanwhile: within the degraded TTL and one (degraded) interval after it is back; when the
  order's source or part upstream failed: that long after it is back; with the watch cache on
  (Options.watch_cache, the default) and its wake-up lost: within 0.75 × list_max_age (the
  cache's full look) and one wait after the loss (a part's wake-up is lost when its write
  lands, before the min TTL its freshness counts from).

Window by window (every 5 s, and anchored at each fault's start and end):
- `load`: order-source calls and heavy part calls stay at or below what the same clients
  would cause polling the legacy way, plus what the contract pays for explicitly (see
  `Loads`, devtools/simulation/loads.py), for the fleet: all replicas together, whatever
  their number. A misbehaving client's own calls are its own: not counted.

After the run:
- `kept_ages`: answers kept in the same second do not all expire in the same second
  (docs/protocol.md: List tags).
- `shutdown`: nothing stays held after a process stops, and it stops within a look (with a
  part request in flight then: within that order's part fetch at its longest).
"""

from __future__ import annotations

from collections.abc import Sequence

from devtools.simulation.answer_checks import AnswerChecks
from devtools.simulation.bounds import ONE_LOOK_S, ONE_PART_FETCH_S, SPIN_POLLS, WINDOW_S
from devtools.simulation.fresh import FreshChecks
from devtools.simulation.loads import Loads
from devtools.simulation.look_checks import LookChecks
from devtools.simulation.upstreams import Call
from devtools.simulation.vloop import WALL_EPOCH_S
from shared.wire import OrderKey


class Checker(AnswerChecks, LookChecks, FreshChecks):
    """Every invariant above: the answer, look and client checks of its bases, and after the
    run the spin, kept ages, loads and what the tag store was told to keep."""

    # --- after the run -----------------------------------------------------------------------

    def process_stopped(
        self, process: str, t: float, took: float, holding: int, *, parts: int = 0
    ) -> None:
        """`parts`: part requests in flight when it was told to stop; each may take its
        fetch at its longest (a slow upstream: a timeout and its retry), not a look."""
        self.note(
            t, "", f"{process} stopped in {took:.3f} s, {holding} polls held, {parts} parts out"
        )
        if holding:
            self.violation(t, "shutdown", f"{process} still holds {holding} polls after stopping")
        if took > (max(ONE_LOOK_S, ONE_PART_FETCH_S) if parts else ONE_LOOK_S) + 0.1:
            self.violation(
                t, "shutdown", f"{process} took {took:.3f} s to answer its polls and stop"
            )

    def _kept_ages(self) -> None:
        """Answers kept within one second do not all expire within one second (checked on
        groups of six or more: with ages drawn over 30 s, six in one second is one chance
        in millions)."""
        kept = sorted(self.store.kept_log, key=lambda record: record.at_ms)
        start = 0
        for end in range(len(kept)):
            while kept[end].at_ms - kept[start].at_ms >= 1000:
                start += 1
            group = kept[start : end + 1]
            if len(group) < 6:
                continue
            expiries = [record.at_ms + record.max_age_ms for record in group]
            if max(expiries) - min(expiries) < 1000:
                t = kept[end].at_ms / 1000 - WALL_EPOCH_S
                whose = ", ".join(sorted({f"{r.user_id}:{r.service}" for r in group}))
                self.violation(
                    t,
                    "kept_ages",
                    f"{len(group)} answers kept within a second ({whose}) all expire within a "
                    f"second, at {min(expiries) / 1000 - WALL_EPOCH_S:.3f}",
                )
                return

    def _spin(self) -> None:
        """A client following the protocol never polls in a tight loop: at once again only
        after news, a wake-up, a timeout or a shutdown, and news is what changed."""
        for client, times in self.polls.items():
            for index in range(SPIN_POLLS, len(times)):
                if times[index] - times[index - SPIN_POLLS] < WINDOW_S:
                    self.violation(
                        times[index],
                        "spin",
                        f"{client} polled {SPIN_POLLS + 1} times in "
                        f"{times[index] - times[index - SPIN_POLLS]:.2f} s",
                        self.clients[client].user_id,
                    )
                    break

    def finish(self, end_t: float, calls: Sequence[Call]) -> None:
        self._spin()
        self._fresh(end_t)
        self._kept_ages()
        Loads(self, calls, end_t).check()
        for kept in self.store.kept_log:
            foreign = [
                orderid
                for orderid in kept.orderids
                if (order := self.world.orders.get(OrderKey(kept.service, orderid))) is None
                or order.user_id != kept.user_id
            ]
            if foreign:
                self.violation(
                    kept.at_ms / 1000 - WALL_EPOCH_S,
                    "crossing",
                    f"an answer kept for {kept.user_id} ({kept.service}) lists {foreign}",
                    kept.user_id,
                )
        for record in self.store.create_log:
            truth = self.world.orders.get(record.key)
            if truth is not None and record.owner is not None and record.owner != truth.user_id:
                self.violation(
                    record.at_ms / 1000 - WALL_EPOCH_S,
                    "crossing",
                    f"tags of {record.key} made naming {record.owner} its owner",
                )
        self.violations.sort(key=lambda v: v.t)

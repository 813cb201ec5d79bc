"""The `fresh` check, client by client after the run (devtools/simulation/checks.py): what each
protocol client saw and held, and by when it had to see each change."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from devtools.simulation.bounds import (
    CREATED_GRACE_S,
    DEGRADED_TTL_S,
    KEPT_LOOK_S,
    MIN_TTL_S,
    SEEN_WITHIN_S,
)
from devtools.simulation.check_base import CheckerBase
from devtools.simulation.trace import status_index
from devtools.simulation.writers import BACKOFF_CAP_S, RESTART_S
from shared.redis import list_channel, tags_channel
from shared.wire import OrderKey

# faults during which the store refuses the writers' writes: they keep them and retry
WRITES_REFUSED = frozenset({"store_down", "store_paused", "redis_outage"})


class FreshChecks(CheckerBase):
    """Client by client: the records the protocol clients report, and `fresh` on them."""

    # --- client by client --------------------------------------------------------------------

    def client_saw(self, client: str, key: OrderKey, status: str, t: float) -> None:
        """`backwards`: an actual answer never takes an order back in its lifecycle from a
        status its client was already answered actual."""
        seen = self.saw.setdefault((client, key), [])
        index = status_index(key.service, status)
        furthest = max((earlier for _, earlier in seen), default=index)
        if index < furthest:
            self.violation(
                t,
                "backwards",
                f"{client} was answered {key} {status}, after a status further on "
                f"(#{furthest} of its lifecycle)",
                self.clients[client].user_id,
            )
        seen.append((t, index))

    def client_version(self, client: str, key: OrderKey, version: int, t: float) -> None:
        self.versions.setdefault((client, key), []).append((t, version))

    def client_orders(self, client: str, keys: Sequence[OrderKey], t: float) -> None:
        self.holds.setdefault(client, []).append((t, frozenset(keys)))

    def client_promise(self, client: str, sent: float, t: float, next_within_s: float) -> None:
        self.promises.setdefault(client, []).append((t, next_within_s, sent))

    def client_polled(self, client: str, t: float) -> None:
        self.polls.setdefault(client, []).append(t)

    def _held(self, client: str, key: OrderKey, t: float) -> bool | None:
        records = self.holds.get(client, [])
        index = bisect.bisect_right(records, t, key=lambda r: r[0]) - 1
        return key in records[index][1] if index >= 0 else None

    # client → when it sent each poll that was answered (filled after the run, by _looked_by)
    _answered_polls: dict[str, set[float]]

    def _looked_by(self, client: str, base: float) -> float | None:
        """When, at the latest, `client` has a poll that looked after `base`, by what the
        server told it: each answer says how soon the next poll looks (plain: within its
        interval; waiting, at once after news, a timeout or a wake-up: within a wait). Polls
        sent before `base` and answered after it (a held poll whose wake-up was lost, say)
        may not show a change made at `base`: their answers' promises count too."""
        records = self.promises.get(client, [])
        first = bisect.bisect_right(records, base, key=lambda r: r[0]) - 1
        if first < 0:
            return None
        bound = records[first][0] + records[first][1]
        for answered, promise, sent in records[first + 1 :]:
            if sent >= base:
                break
            bound = max(bound, answered + promise)
        # a held poll out at `base` that the client gave up (an order made on the device) has
        # no answer to promise anything: the client looks with the poll it sends instead
        polls = self.polls.get(client, [])
        out = bisect.bisect_left(polls, base) - 1
        if out >= 0 and polls[out] > records[first][2]:
            answered_polls = self._answered_polls.get(client)
            if answered_polls is None:
                answered_polls = self._answered_polls[client] = {sent for *_, sent in records}
            if polls[out] not in answered_polls:
                following = polls[out + 1] if out + 1 < len(polls) else float("inf")
                bound = max(bound, following)
        return bound

    def _longest(self, client: str, start: float, end: float) -> float:
        """The longest promise of the answers `client` got in [start, end]."""
        records = self.promises.get(client, [])
        first = max(0, bisect.bisect_right(records, start, key=lambda r: r[0]) - 1)
        last = bisect.bisect_right(records, end, key=lambda r: r[0])
        return max((promise for _, promise, _ in records[first:last]), default=0.0)

    def _seen_by(
        self,
        base: float,
        client: str,
        service: str,
        upstream: str | None,
        channels: Sequence[str] = (),
        written: float | None = None,
    ) -> float | None:
        """When a change written at `base` must be held by `client` at the latest, with the
        contract's exceptions; None when the client had not started. A wake-up lost on one
        of `channels` (the order's, the user's list of the service) may be missed by polls
        held from the last look before it until the next full look (docs/protocol.md:
        Waiting poll, at least every 0.75 × list_max_age), and one wait more. `written`:
        when the change's write landed, if `base` is later (a part's min TTL after it): its
        wake-up is lost then, not at `base`."""
        looked = self._looked_by(client, base)
        if looked is None:
            return None
        deadline = max(base, looked) + SEEN_WITHIN_S
        for _ in range(8):
            extended = deadline
            longest = self._longest(client, base - 1, extended)
            for span in self.timeline.degraded_spans(base - 1, deadline):
                extended = max(extended, span.end + longest + SEEN_WITHIN_S)
                if self.timeline.emptied(span.start, span.end):
                    # back empty: the order's tags are made again by the first look after it,
                    # and a part whose tag was made again is due at the order's own moment in
                    # the degraded TTL from then (shared/protocol/need_request.py), then seen
                    # by the next poll
                    remade = span.end + longest
                    extended = max(extended, remade + DEGRADED_TTL_S + longest + SEEN_WITHIN_S)
            for span in self.timeline.source_spans(service, base - 1, deadline):
                extended = max(extended, span.end + MIN_TTL_S + longest + SEEN_WITHIN_S)
            # the store lost the order's tags while its source was out (before the change or
            # after it), or so shortly before it went out that no look of the client made them
            # again: they are made again by the first look with the source back, and a part
            # whose tag was made again, or was issued degraded while they were missing (up to
            # the source's return, so also for a change made just after it), is refetched
            # spread over the degraded TTL from then (docs/protocol.md: A fleet, a flush
            # bounded the same way)
            for span in self.timeline.source_spans(
                service, base - 1 - DEGRADED_TTL_S - longest, deadline
            ):
                lost_from = min(base - 1, span.start - longest - SEEN_WITHIN_S)
                if self.timeline.emptied(lost_from, span.end):
                    remade = span.end + MIN_TTL_S + longest
                    extended = max(extended, remade + DEGRADED_TTL_S + longest + SEEN_WITHIN_S)
            if upstream is not None:
                for span in self.timeline.upstream_spans(upstream, base - 1, deadline):
                    extended = max(extended, span.end + longest + SEEN_WITHIN_S)
            for lost_t, channel in self.store.lost_messages if self.watch_cache else ():
                if min(base, written or base) - 1 <= lost_t <= deadline and channel in channels:
                    extended = max(extended, lost_t + KEPT_LOOK_S + longest + SEEN_WITHIN_S)
            if extended == deadline:
                break
            deadline = extended
        return deadline

    def _due(self, data_t: float) -> float:
        """When a write made with the data at `data_t` has landed at the latest: at once,
        or when the store is back and the writers' backoff has come round (at most its cap),
        or when a writer that died is back (docs/protocol.md: Feature data and user
        changes: a tag write is delivered at least once)."""
        due = data_t + 0.01
        died = any(span.start <= data_t <= span.end for span in self.timeline.bump_loss)
        if died:
            due += RESTART_S[1]
        for _ in range(8):
            later = max(
                [due]
                + [
                    f.end + BACKOFF_CAP_S + 0.1
                    for f in self.timeline.faults
                    if f.kind in WRITES_REFUSED and f.start <= due and data_t <= f.end
                ]
            )
            if later == due:
                break
            due = later
        return due

    def _landed(self, landed: float | None, data_t: float) -> float:
        """The moment a change's freshness is counted from: when its write landed, but no
        later than the writers' bound (a write lost, or late, leaves the change hidden)."""
        due = self._due(data_t)
        return landed if landed is not None and landed <= due else due

    def _fresh(self, end_t: float) -> None:
        self._answered_polls = {}
        protocol = [c for c in self.clients.values() if not c.misbehaving]
        for change in self.world.status_changes:
            order = self.world.orders[change.key]
            service = change.key.service
            # the part a status change is seen by: fast_info's own upstream, for taxi
            upstream = "order_core" if service == "taxi" else f"{service}_full"
            channels = (
                tags_channel(service, change.key.orderid),
                list_channel(service, change.user_id),
            )
            for client in protocol:
                if client.user_id != change.user_id or not self._held(
                    client.name, change.key, change.data_t
                ):
                    continue
                if change.finished:
                    base = self._landed(change.list_bump_t, change.data_t)
                    if order.tags_written_t is not None:
                        # while its tags exist (their delete came later than the list bump: a
                        # writer died between) a known order its source no longer lists is
                        # kept, stale, within its created grace (docs/protocol.md: A
                        # just-created order the source does not list yet)
                        deleted = self._landed(change.part_bump_t, change.data_t)
                        grace_end = order.tags_written_t + CREATED_GRACE_S
                        base = max(base, min(deleted, grace_end))
                    deadline = self._seen_by(base, client.name, service, None, channels)
                    if (
                        deadline is not None
                        and deadline < end_t
                        and self._held(client.name, change.key, deadline)
                    ):
                        self.violation(
                            deadline,
                            "fresh",
                            f"{client.name} still shows {change.key}, finished at "
                            f"{change.data_t:.3f} (list bump {change.list_bump_t})",
                            client.user_id,
                        )
                    continue
                gone = order.finished_t
                deadline = self._seen_by(
                    self._landed(change.list_bump_t, change.data_t),
                    client.name,
                    service,
                    None,
                    channels,
                )
                if (
                    deadline is not None
                    and deadline < end_t
                    and (gone is None or deadline < gone)
                    and self._held(client.name, change.key, deadline)
                    and not self._saw(
                        client.name,
                        change.key,
                        change.data_t,
                        deadline,
                        status_index(service, change.status),
                    )
                ):
                    self.violation(
                        deadline,
                        "fresh",
                        f"{client.name} has not seen {change.key} {change.status} (data "
                        f"{change.data_t:.3f}, list bump {change.list_bump_t}) by "
                        f"{deadline:.3f}",
                        client.user_id,
                    )
                landed = self._landed(change.part_bump_t, change.data_t)
                deadline = self._seen_by(
                    landed + MIN_TTL_S, client.name, service, upstream, channels, landed
                )
                if (
                    deadline is not None
                    and deadline < end_t
                    and (gone is None or deadline < gone)
                    and self._held(client.name, change.key, deadline)
                    and not self._version(
                        client.name, change.key, change.data_t, deadline, change.version
                    )
                ):
                    self.violation(
                        deadline,
                        "fresh",
                        f"{client.name} has not fetched {change.key} version "
                        f"{change.version} ({change.status}; data {change.data_t:.3f}, "
                        f"tags {change.part_bump_t}) by {deadline:.3f}",
                        client.user_id,
                    )

    def _saw(self, client: str, key: OrderKey, start: float, end: float, index: int) -> bool:
        return any(
            start <= t <= end and seen >= index for t, seen in self.saw.get((client, key), ())
        )

    def _version(self, client: str, key: OrderKey, start: float, end: float, version: int) -> bool:
        return any(t <= end and seen >= version for t, seen in self.versions.get((client, key), ()))

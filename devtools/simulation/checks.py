"""The invariants, checked on every answer, every look and every window of a run.

Answer by answer (each poll's answer as the server gives it):
- `crossing`: no order of another user is ever answered actual; a stale order is only what
  the client sent; no part data of another user's order; no poll is held listening on, or is
  woken by, another user's channel; no tags are made naming another user as an order's owner.
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

Client by client, after the run:
- `fresh`: a status change whose list tag was written is seen within one interval (one wait
  for a waiting client) of the write; its part (the data version) within the min TTL and one
  interval; a finished order is gone from the client within one interval of its bump, or
  `list_max_age` and one interval without it. When the tag store was unavailable or emptied
  meanwhile: within the degraded TTL and one (degraded) interval after it is back; when the
  order's source or part upstream failed: that long after it is back; with the watch cache on
  (Options.watch_cache) and its wake-up lost: within 0.75 × list_max_age (the cache's full
  look) and one wait after the loss.

Window by window (every 5 s, and anchored at each fault's start and end):
- `load`: order-source calls and heavy part calls stay at or below what the same clients
  would cause polling the legacy way, plus what the contract pays for explicitly (see
  `Loads`). A misbehaving client's own calls are its own: not counted.

After the run:
- `kept_ages`: answers kept in the same second do not all expire in the same second
  (docs/protocol.md: List tags).
- `shutdown`: nothing stays held after a process stops.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import msgspec

from devtools.simulation.bff import SETTINGS, PollReply
from devtools.simulation.clients import BACKOFF_CAP_S
from devtools.simulation.scenario import Scenario
from devtools.simulation.store import SimTagStore
from devtools.simulation.timeline import Timeline
from devtools.simulation.upstreams import PART_TIMEOUT_S, SOURCE_DEADLINE_S, Call
from devtools.simulation.vloop import WALL_EPOCH_S
from devtools.simulation.world import World
from emulator.documents import LIFECYCLES
from services.bff.engine import LookResult
from services.bff.known_orders import ParsedKnownOrder
from shared.answer import ActualOrder, StaleOrder
from shared.policy import PartEndpoint, PollingPolicy
from shared.protocol.list_tags import KEPT_AGE_SPREAD_FROM
from shared.protocol.tags import valid_tag
from shared.redis import list_channel, tags_channel
from shared.wire import OrderKey

LIST_MAX_AGE_S = SETTINGS.list_max_age_s
MIN_TTL_S = SETTINGS.min_ttl_s
# a waiting poll held from its client's last look (the watch cache) misses a change whose
# wake-up was lost until a full look, at most this long after that look
KEPT_LOOK_S = KEPT_AGE_SPREAD_FROM * LIST_MAX_AGE_S
DEGRADED_TTL_S = SETTINGS.degraded_min_ttl_s
FORCE_PER_MINUTE = SETTINGS.force_per_order_per_minute
TAGS_DEADLINE_S = SETTINGS.tags_deadline_s
# one look at its longest: the tag read (behind the joined reads in flight), the sources, the
# read of new orders' tags and their creation, and the network both ways
ONE_LOOK_S = SOURCE_DEADLINE_S + 5 * TAGS_DEADLINE_S + 0.05
# a look, then the part fetch at its longest (one retry), and the network: what a client needs
# after the poll that tells it of a change to hold it
SEEN_WITHIN_S = 2 * ONE_LOOK_S + 2 * PART_TIMEOUT_S + 0.5
SERVICES = ("taxi", "eats", "grocery")
HEAVY = frozenset({"totw", "eats_full", "grocery_full"})
PERFORMER = "orderperformerinfo"
WINDOW_S = 5.0
# more polls than this in one window is a client in a loop (a burst of changes gives a few)
SPIN_POLLS = 12


@dataclass
class Violation:
    t: float
    invariant: str
    message: str
    user_id: str = ""


@dataclass
class ClientInfo:
    name: str
    user_id: str
    wait_ms: int
    legacy_period_s: float
    start_t: float
    misbehaving: bool


@dataclass
class TraceEvent:
    t: float
    user_id: str
    # the text, or what makes it: most events are never shown, so most are never formatted
    text: str | Callable[[], str]

    def line(self) -> str:
        text = self.text if isinstance(self.text, str) else self.text()
        return f"  {self.t:9.3f}  {self.user_id or '-':>4}  {text}"


@dataclass
class Trace:
    events: list[TraceEvent] = field(default_factory=list)

    def add(self, t: float, user_id: str, text: str | Callable[[], str]) -> None:
        self.events.append(TraceEvent(t, user_id, text))

    def around(
        self, t: float, user_id: str, before_s: float = 30.0, after_s: float = 5.0
    ) -> list[str]:
        near = [
            event
            for event in self.events
            if t - before_s <= event.t <= t + after_s
            and (not user_id or event.user_id in (user_id, ""))
        ]
        before = [event.line() for event in near if event.t <= t][-45:]
        after = [event.line() for event in near if event.t > t][:15]
        return before + after


def _shown(value: object) -> object:
    return bytes(value).decode() if isinstance(value, msgspec.Raw) else value


def _status_index(service: str, status: str) -> int:
    lifecycle = LIFECYCLES[service]
    return lifecycle.index(status) if status in lifecycle else len(lifecycle)


def describe_orders(orders: Iterable[ActualOrder | StaleOrder]) -> str:
    parts = []
    for order in orders:
        if isinstance(order, ActualOrder):
            need = f" need={','.join(order.need_request)}" if order.need_request else ""
            parts.append(f"{order.orderid}:{order.status}{need}")
        else:
            parts.append(f"{order.orderid}:{order.status}(stale)")
    return "[" + " ".join(parts) + "]"


class Checker:
    def __init__(
        self,
        scenario: Scenario,
        world: World,
        store: SimTagStore,
        policy: PollingPolicy,
        clients: Sequence[ClientInfo],
        *,
        watch_cache: bool = False,
    ) -> None:
        self.scenario = scenario
        # polls held from their last look (the watch cache) see a change whose wake-up was
        # lost on a live connection at their next full look, not at the next poll
        self.watch_cache = watch_cache
        self.world = world
        self.store = store
        self.policy = policy
        self.timeline = Timeline(scenario.faults)
        self.clients = {client.name: client for client in clients}
        self.violations: list[Violation] = []
        self.trace = Trace()
        # client → its records: (t, status index) and (t, version) seen per order, the orders
        # it holds after each answer, and per answer (when, its promise, when its poll went)
        self.saw: dict[tuple[str, OrderKey], list[tuple[float, int]]] = {}
        self.versions: dict[tuple[str, OrderKey], list[tuple[float, int]]] = {}
        self.holds: dict[str, list[tuple[float, frozenset[OrderKey]]]] = {}
        self.promises: dict[str, list[tuple[float, float, float]]] = {}
        # (order, user) → when a look of that user's forced the order
        self.forces: dict[tuple[OrderKey, str], list[float]] = {}
        self._owners: dict[str, str] = {}
        # client → when it sent each poll; user → when each look of its began
        self.polls: dict[str, list[float]] = {}
        self.look_times: dict[str, list[float]] = {}
        self.answers = 0
        self.looks = 0

    def violation(self, t: float, invariant: str, message: str, user_id: str = "") -> None:
        self.violations.append(Violation(t, invariant, message, user_id))
        self.trace.add(t, user_id, f"VIOLATION {invariant}: {message}")

    def note(self, t: float, user_id: str, text: str | Callable[[], str]) -> None:
        self.trace.add(t, user_id, text)

    # --- answer by answer ------------------------------------------------------------------

    def answered(self, process: str, user_id: str, reply: PollReply) -> None:
        self.answers += 1
        kind = (
            "launch" if reply.launch else f"poll wait={reply.wait_ms}" if reply.wait_ms else "poll"
        )
        if reply.status != 200:
            self.note(reply.answered, user_id, f"{process} {kind} -> {reply.status}")
            return

        def text() -> str:
            cause = f" {reply.cause.value}" if reply.cause is not None else ""
            sent = " ".join(f"{k['orderid']}{'!' if k.get('force') else ''}" for k in reply.known)
            return (
                f"{process} {kind} [{sent}] ({reply.started:.3f}) -> "
                f"{describe_orders(reply.orders)} {reply.interval_ms} ms{cause}"
                f"{' degraded' if reply.degraded else ''}"
            )

        self.note(reply.answered, user_id, text)
        self._deadline(process, user_id, reply)
        sent_by_key = {OrderKey(k["service"], k["orderid"]): k for k in reply.known}
        answered: set[OrderKey] = set()
        keys: list[tuple[str, str, str]] = []
        for order in reply.orders:
            if order.key in answered:
                self.violation(reply.answered, "crossing", f"{order.key} answered twice", user_id)
            answered.add(order.key)
            truth = self.world.orders.get(order.key)
            if isinstance(order, ActualOrder):
                if truth is None or truth.user_id != user_id:
                    owner = truth.user_id if truth is not None else "nobody"
                    self.violation(
                        reply.answered,
                        "crossing",
                        f"{order.key} of {owner} answered actual to {user_id}",
                        user_id,
                    )
                    continue
                keys.append((truth.created_at, order.service, order.orderid))
                continue
            known = sent_by_key.get(order.key)
            if known is None:
                self.violation(
                    reply.answered,
                    "crossing",
                    f"stale {order.key} the client did not send",
                    user_id,
                )
                continue
            echoed = {
                k: v
                for k, v in known.items()
                if k not in ("orderid", "service", "status", "tags", "force", "created_at")
            }
            if (
                order.status != known.get("status", "")
                or order.tags != known.get("tags", {})
                or order.echo != echoed
            ):
                self.violation(
                    reply.answered,
                    "crossing",
                    f"stale {order.key} is not what the client sent: {order}",
                    user_id,
                )
            created_at = known.get("created_at")
            if isinstance(created_at, str):
                keys.append((created_at, order.service, order.orderid))
        if keys != sorted(keys):
            self.violation(
                reply.answered,
                "order",
                f"orders not in canonical order: {[k[2] for k in keys]}",
                user_id,
            )
        for key in sent_by_key:
            if key not in answered:
                self._absent(user_id, key, reply)

    def _deadline(self, process: str, user_id: str, reply: PollReply) -> None:
        took = reply.answered - reply.started
        limit = ONE_LOOK_S
        if reply.wait_ms:
            limit += reply.wait_ms / 1000 * 17 / 16 + ONE_LOOK_S + 1.0
        if took > limit:
            self.violation(
                reply.answered,
                "deadline",
                f"{process} answered a poll (wait_ms {reply.wait_ms}) in {took:.3f} s, "
                f"more than {limit:.3f} s",
                user_id,
            )

    def _absent(self, user_id: str, key: OrderKey, reply: PollReply) -> None:
        """A known order left out: fine when it is not the user's or not active throughout."""
        truth = self.world.orders.get(key)
        if truth is None or truth.user_id != user_id:
            return
        if not (truth.active_at(reply.started) and truth.active_at(reply.answered)):
            return
        unwritten = truth.tags_written_t is None or truth.created_bump_t is None
        if unwritten and reply.started < truth.created_t + LIST_MAX_AGE_S + 2:
            # a creation whose tags never landed: a kept answer from before it stands for the
            # source up to list_max_age; with no tags there is no grace
            return
        lag = self.timeline.lag_at(key.service, reply.started - 1, reply.answered)
        if lag and reply.started < truth.created_t + lag + 0.1:
            unknowable = truth.tags_written_t is None or bool(
                self.timeline.store_spans(reply.started - 1, reply.answered)
            )
            flushed = any(
                span.fault.kind in ("flush", "redis_outage") and span.start >= truth.created_t
                for span in self.timeline.store_spans(truth.created_t, reply.answered)
            )
            if unknowable or flushed:
                return
        self.violation(
            reply.answered,
            "vanished",
            f"{key} (created {truth.created_t:.3f}, tags {truth.tags_written_t}, list bump "
            f"{truth.created_bump_t}) is active but absent from the answer to {user_id}",
            user_id,
        )

    def part_answered(
        self, user_id: str, endpoint: PartEndpoint, parts: list[dict[str, object]]
    ) -> None:
        self.note(
            self.world.now(),
            user_id,
            lambda: (
                f"part {endpoint.rule.part_name} -> "
                + " ".join(
                    f"{p['orderid']}:{_shown(p.get('version', p.get('error', '-')))}" for p in parts
                )
            ),
        )
        for part in parts:
            if "error" in part:
                continue
            truth = self.world.orders.get(OrderKey(endpoint.service, str(part["orderid"])))
            if truth is None or truth.user_id != user_id:
                self.violation(
                    self.world.now(),
                    "crossing",
                    f"part {endpoint.rule.part_name} of {part['orderid']} answered to {user_id}",
                    user_id,
                )

    # --- wake-ups ----------------------------------------------------------------------------

    def _channel_owner(self, channel: str) -> str | None:
        if channel not in self._owners:
            # an order made since the last look: every channel named afresh
            self._owners = {
                tags_channel(key.service, key.orderid): order.user_id
                for key, order in self.world.orders.items()
            }
            self._owners.update(
                (list_channel(service, client.user_id), client.user_id)
                for client in self.clients.values()
                for service in SERVICES
            )
        return self._owners.get(channel)

    def held(self, user_id: str, channels: Sequence[str]) -> None:
        for channel in channels:
            if self._channel_owner(channel) != user_id:
                self.violation(
                    self.world.now(),
                    "crossing",
                    f"a poll of {user_id} is held listening on {channel}",
                    user_id,
                )

    def rung(self, user_id: str, channel: str, *, held: bool) -> None:
        if held and self._channel_owner(channel) != user_id:
            self.violation(
                self.world.now(),
                "crossing",
                f"a held poll of {user_id} was woken by a write on {channel}",
                user_id,
            )

    # --- look by look ------------------------------------------------------------------------

    def look(
        self,
        process: str,
        user_id: str,
        known: Sequence[ParsedKnownOrder],
        started: float,
        result: LookResult,
        before: dict[OrderKey, Any],
    ) -> None:
        self.looks += 1
        self.look_times.setdefault(user_id, []).append(started)
        now = self.world.now()
        for order in result.orders:
            if not isinstance(order, ActualOrder):
                continue
            truth = self.world.orders.get(order.key)
            if truth is None or truth.finished_t is None or started <= truth.finished_t:
                continue
            lag = self.timeline.lag_at(order.service, started - 1, now)
            if lag and started - lag < truth.finished_t + 0.1:
                continue
            finish = next(
                (c for c in self.world.status_changes if c.key == order.key and c.finished), None
            )
            bumped = finish.list_bump_t if finish is not None else None
            if bumped is not None and started > bumped:
                self.violation(
                    now,
                    "finished",
                    f"{order.key} finished at {truth.finished_t:.3f}, its list bump landed at "
                    f"{bumped:.3f}, and a look of {user_id} begun at {started:.3f} answered it",
                    user_id,
                )
            elif started > truth.finished_t + LIST_MAX_AGE_S + 2:
                self.violation(
                    now,
                    "finished",
                    f"{order.key} finished at {truth.finished_t:.3f} and is still answered "
                    f"actual to {user_id} {started - truth.finished_t:.1f} s later",
                    user_id,
                )
        self._force(user_id, known, started, result, before)

    def looked_again(self, process: str, user_id: str, lost: str) -> None:
        self.violation(
            self.world.now(),
            "lost_redis",
            f"a held poll of {user_id} on {process} looked again (asking its sources) though "
            f"{process} knew {lost} was lost: it must answer with its last look",
            user_id,
        )

    def kept_look_missed(
        self, process: str, user_id: str, channels: Sequence[str], since_s: float, news: str
    ) -> None:
        watched = set(channels)
        if any(t >= since_s and c in watched for t, c in self.store.lost_messages):
            return
        self.violation(
            self.world.now(),
            "watch_cache",
            f"a poll of {user_id} on {process} was held from its last look, but a fresh look "
            f"had news: {news}",
            user_id,
        )

    def look_started(self, known: Sequence[ParsedKnownOrder]) -> dict[OrderKey, Any]:
        return {k.key: self.store.content(k.key) for k in known if k.order.force}

    def _force(
        self,
        user_id: str,
        known: Sequence[ParsedKnownOrder],
        started: float,
        result: LookResult,
        before: dict[OrderKey, Any],
    ) -> None:
        answered = {order.key: order for order in result.orders}
        for k in known:
            if not k.order.force:
                continue
            times = self.forces.setdefault((k.key, user_id), [])
            times.append(started)
            truth = self.world.orders.get(k.key)
            if truth is None or truth.user_id != user_id or result.degraded:
                continue
            recent = len(times) - bisect.bisect_right(times, started - 60.0)
            if recent > FORCE_PER_MINUTE:
                continue
            order = answered.get(k.key)
            stored = before.get(k.key)
            if not isinstance(order, ActualOrder) or stored is None:
                continue
            if self.store.content(k.key) != stored:
                continue  # written during the look: which one it read is not known
            served = self.policy.services[k.key.service]
            now_ms = int((WALL_EPOCH_S + started) * 1000)
            for rule in served.rules_by_priority:
                if not rule.tag_defined or rule.static or rule.part_name not in stored:
                    continue
                tag = valid_tag(k.order.tags.get(rule.part_name), served.policy_version, now_ms)
                if tag is not None and tag.content == stored[rule.part_name]:
                    continue
                if rule.part_name not in order.need_request:
                    self.violation(
                        self.world.now(),
                        "force",
                        f"{user_id} forced its order {k.key} (its force #{recent} in a "
                        f"minute) and {rule.part_name} changed, but it is not needed: "
                        f"need_request={order.need_request}",
                        user_id,
                    )
                    return

    # --- client by client --------------------------------------------------------------------

    def client_saw(self, client: str, key: OrderKey, status: str, t: float) -> None:
        self.saw.setdefault((client, key), []).append((t, _status_index(key.service, status)))

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
    ) -> float | None:
        """When a change written at `base` must be held by `client` at the latest, with the
        contract's exceptions; None when the client had not started. A wake-up lost on one
        of `channels` (the order's, the user's list of the service) may be missed by polls
        held from the last look before it until the next full look (docs/protocol.md:
        Waiting poll, at least every 0.75 × list_max_age), and one wait more."""
        looked = self._looked_by(client, base)
        if looked is None:
            return None
        deadline = max(base, looked) + SEEN_WITHIN_S
        for _ in range(8):
            extended = deadline
            longest = self._longest(client, base - 1, extended)
            for span in self.timeline.degraded_spans(base - 1, deadline):
                extended = max(extended, span.end + longest + SEEN_WITHIN_S)
            for span in self.timeline.source_spans(service, base - 1, deadline):
                extended = max(extended, span.end + MIN_TTL_S + longest + SEEN_WITHIN_S)
            if upstream is not None:
                for span in self.timeline.upstream_spans(upstream, base - 1, deadline):
                    extended = max(extended, span.end + longest + SEEN_WITHIN_S)
            for lost_t, channel in self.store.lost_messages if self.watch_cache else ():
                if base - 1 <= lost_t <= deadline and channel in channels:
                    extended = max(extended, lost_t + KEPT_LOOK_S + longest + SEEN_WITHIN_S)
            if extended == deadline:
                break
            deadline = extended
        return deadline

    def _fresh(self, end_t: float) -> None:
        protocol = [c for c in self.clients.values() if not c.misbehaving]
        for change in self.world.status_changes:
            order = self.world.orders[change.key]
            service = change.key.service
            upstream = "totw" if service == "taxi" else f"{service}_full"
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
                    base = (
                        change.list_bump_t
                        if change.list_bump_t is not None
                        else change.data_t + LIST_MAX_AGE_S + 2
                    )
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
                if change.list_bump_t is not None:
                    deadline = self._seen_by(
                        change.list_bump_t, client.name, service, None, channels
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
                            _status_index(service, change.status),
                        )
                    ):
                        self.violation(
                            deadline,
                            "fresh",
                            f"{client.name} has not seen {change.key} {change.status} (data "
                            f"{change.data_t:.3f}, list bump {change.list_bump_t:.3f}) by "
                            f"{deadline:.3f}",
                            client.user_id,
                        )
                if change.part_bump_t is not None:
                    deadline = self._seen_by(
                        change.part_bump_t + MIN_TTL_S, client.name, service, upstream, channels
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
                            f"tags {change.part_bump_t:.3f}) by {deadline:.3f}",
                            client.user_id,
                        )

    def _saw(self, client: str, key: OrderKey, start: float, end: float, index: int) -> bool:
        return any(
            start <= t <= end and seen >= index for t, seen in self.saw.get((client, key), ())
        )

    def _version(self, client: str, key: OrderKey, start: float, end: float, version: int) -> bool:
        return any(t <= end and seen >= version for t, seen in self.versions.get((client, key), ()))

    # --- after the run -----------------------------------------------------------------------

    def process_stopped(self, process: str, t: float, took: float, holding: int) -> None:
        self.note(t, "", f"{process} stopped in {took:.3f} s, {holding} polls held")
        if holding:
            self.violation(t, "shutdown", f"{process} still holds {holding} polls after stopping")
        if took > ONE_LOOK_S + 0.1:
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
      look (or the one after the min TTL), one per replica its parallel part requests reach
      (part fetches coalesce within a process); the parts once more after the store lost its
      tags; while a part upstream fails, each client's retries with backoff.
    So held polls looking again all at once when Redis is lost, with no poll sent, are paid
    for by nothing: "losing Redis must cost the sources nothing in that instant"."""

    def __init__(self, checker: Checker, calls: Sequence[Call], end_t: float) -> None:
        self.checker = checker
        self.end_t = end_t
        self.replicas = checker.scenario.replicas
        misbehaving = {c.user_id for c in checker.clients.values() if c.misbehaving}
        kept = [call for call in calls if call.user_id not in misbehaving]
        self.sources = sorted(c.t for c in kept if c.target.startswith("source:"))
        self.heavy = sorted(c.t for c in kept if c.target in HEAVY)
        self.performer = sorted(c.t for c in kept if c.target == PERFORMER)
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
        changes = [(t, world.orders[key], "slow" in parts) for t, key, parts in world.part_bumps]
        changes += [(o.created_t, o, o.key.service == "taxi") for o in world.orders.values()]
        # a user's change is forced until seen, whether its tags were written or not: a
        # forced part whose tag was issued while the store was down is fetched again (rule 3's
        # degraded tags, refetched when forced)
        changes += [
            (c.data_t, world.orders[c.key], c.key.service == "taxi") for c in world.user_changes
        ]
        for t, order, performer in changes:
            user = order.user_id
            if user not in looks:
                continue
            first = next_looks(user, t, 1)
            due = next_looks(user, t + MIN_TTL_S, 1)
            if not first:
                continue
            span = (first[0] - 1, (due[0] if due else first[0]) + 1)
            heavy.append((*span, float(self.replicas * devices[user])))
            if performer:
                slow.append((*span, float(devices[user])))
        for t in recovered:
            for user in users:
                active = sum(1 for a, b, _ in self.orders[user] if a <= t < b)
                taxi = sum(1 for a, b, svc in self.orders[user] if a <= t < b and svc == "taxi")
                heavy.append((t, t + DEGRADED_TTL_S + 30, float(active * devices[user])))
                slow.append((t, t + DEGRADED_TTL_S + 30, float(taxi * devices[user])))
        self.paid_heavy = heavy
        self.paid_slow = slow
        # a finished order still listed: by a kept answer up to list_max_age when its list
        # bump was lost, by a lagging replica for its lag; each poll of a client then fetches
        # its parts (404: expired)
        self.unbumped = [
            (c.data_t, c.data_t + LIST_MAX_AGE_S + 2, c.user_id, c.key.service)
            for c in world.status_changes
            if c.finished and c.list_bump_t is None
        ] + [
            (c.data_t, c.data_t + lag + 1, c.user_id, c.key.service)
            for c in world.status_changes
            if c.finished
            for lag in (timeline.lag_at(c.key.service, c.data_t, c.data_t),)
            if lag
        ]
        self.degraded = [(s.start, s.end + DEGRADED_TTL_S) for s in timeline.store]
        self.upstream_faults = [
            (f.start, f.end + BACKOFF_CAP_S)
            for f in timeline.faults
            if f.kind.startswith("upstream_")
        ]

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
        allow_heavy = allow_performer = 0.0
        # a look begun just before the window asks its sources within it
        low = bisect.bisect_left(self.paid_sources, start - 1)
        high = bisect.bisect_left(self.paid_sources, end)
        allow_sources = self.paid_sources_sum[high] - self.paid_sources_sum[low]
        allow_heavy += sum(n for a, b, n in self.paid_heavy if a < end and start <= b)
        allow_performer += sum(n for a, b, n in self.paid_slow if a < end and start <= b)
        degraded = any(a < end and start < b for a, b in self.degraded)
        failing_parts = any(a < end and start < b for a, b in self.upstream_faults)
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
            if degraded:
                # the degraded memo is per process: one call per order and process in a
                # degraded TTL
                allow_heavy += (self.replicas - 1) * active
                allow_performer += (self.replicas - 1) * taxi
            # a part upstream failing: each failed part is retried by the client with backoff
            # (1 s, then 2, then 4: three tries in 5 s) and each try by the BFF once; in a
            # fleet the BFF's breaker caps this (ten failures, then a probe each 2 s), which
            # a handful of orders never reach
            if failing_parts:
                allow_heavy += 6 * active
                allow_performer += 6 * taxi
        return any(
            (
                self._over("sources", self.sources, start, end, legacy_sources, allow_sources),
                self._over("heavy", self.heavy, start, end, legacy_heavy, allow_heavy),
                self._over("performer", self.performer, start, end, legacy_totw, allow_performer),
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

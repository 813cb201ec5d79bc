"""The reference client of the order polling protocol (docs/protocol.md: Writing a client).

Read it as documentation of the client half of the contract:

1. `launch()`: the short state of all active orders, and the polling policy; with extended
   order info, the required parts of each order inline, so it renders with no part request.
2. `cycle()`: poll `/mlutp/v1/orders/state` with the known orders, in the order they are
   shown, each with its per-part tags; then fetch the parts in `need_request`, by priority,
   a few requests in parallel; then show the result.
3. `run()`: cycle at the interval the server gives in `X-Yataxi-Polling-Interval-Ms`
   (never cached; 2 s when absent). With `wait_ms` set, each poll is a waiting poll: the
   server holds it until something changes, and the next poll goes out right after the
   answer (and the parts it asked for), unless the server says it could not wait
   (`X-Mlutp-Wait: unavailable | shed`) or a part failed: then the interval applies.

Rules the client keeps:
- A part's response replaces that part's fields: a field of the part absent from it is deleted.
- A `stale` order keeps what the client had (its echo fields, its tags) and shows a loader;
  its `need_request` is ignored.
- An order that disappears from the answer has finished: it is dropped.
- A part that fails is marked stale (its old fields stay, flagged) and retried with capped,
  jittered backoff. An `expired` order is gone.
- Parts of an unknown `part_type` are ignored.
- The visible state of an order changes only once its `required` parts have arrived.
- After a user change, the order is locked and polled with `force: true` until a part shows
  the version the change returned.
- The route part (`route_distance_depended`) is polled by the client's own rule.
- An answer naming another policy version than the client holds (`policy_versions`) makes it
  launch again at once: new rules, and every part fetched anew from their endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

INTERVAL_HEADER = "X-Yataxi-Polling-Interval-Ms"
WAIT_HEADER = "X-Mlutp-Wait"
# the server waited or had news: the next waiting poll may go out at once
POLL_AGAIN_AT_ONCE = frozenset({"news", "wakeup", "timeout", "shutdown"})
SUPPORTED_PART_TYPES = frozenset({"totw", "eats_full", "grocery_full", "taxiroute"})
# keys of a state order that are not the source's brief fields
STATE_KEYS = frozenset(
    {
        "orderid",
        "service",
        "status",
        "tags",
        "need_request",
        "update_status",
        "change_capabilities",
        "parts",
    }
)
ROUTE_STATUSES = frozenset({"driving", "waiting", "transporting"})
# the user changes the app knows: feature → the field it writes; versioned or last-write-wins
FEATURE_FIELDS = {"destination": "destinations", "comment": "comment", "tips": "tips"}
LAST_WRITE_WINS = frozenset({"tips"})


@dataclass(frozen=True)
class Rule:
    service: str
    part_name: str
    url: str
    fields: tuple[str, ...]
    polling_type: str
    part_type: str
    priority: int
    required: bool = False
    static: bool = False

    @property
    def tag_defined(self) -> bool:
        return self.polling_type == "tag_defined"


@dataclass
class Part:
    tag: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    arrived: bool = False  # has arrived at least once
    stale: bool = False  # the last fetch failed: the fields are old
    failures: int = 0
    retry_at: float = 0.0
    fetched_at: float = 0.0


@dataclass
class PendingChange:
    """A user change sent and not yet seen in a part: the order stays locked, shows the new
    value, and is polled with force. `feature` None: a change made outside this client
    (`user_changed`), known only by the version it returned."""

    feature: str | None
    value: Any
    deadline: float
    # versioned: the data version that shows it (or, after a conflict, the one to wait for
    # before the single retry); last-write-wins: the request's idempotency key
    version: int | None = None
    idempotency_key: str | None = None
    conflict: bool = False
    retried: bool = False

    @property
    def field(self) -> str | None:
        return FEATURE_FIELDS[self.feature] if self.feature is not None else None


@dataclass
class Order:
    orderid: str
    service: str
    status: str
    update_status: str = "actual"
    # the source's brief fields (actual) or what we echo for ourselves (stale)
    brief: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Part] = field(default_factory=dict)
    seen_version: int = 0
    # a user change waits to be seen
    pending_change: PendingChange | None = None
    # kind of change → {"allowed": bool, "reason"?: str}, as the last answer said
    change_capabilities: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def locked(self) -> bool:
        """A user change is on its way: the UI keeps the order locked, polls with force."""
        return self.pending_change is not None


@dataclass(frozen=True)
class OrderView:
    """What a UI renders for one order."""

    orderid: str
    service: str
    status: str
    update_status: str  # "stale": show a loader
    loading: bool  # required parts have not arrived yet
    locked: bool  # a user change is not yet seen
    data: dict[str, Any]
    stale_fields: frozenset[str]
    brief: dict[str, Any]
    # what the user may change now; a stale order allows nothing
    change_capabilities: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ClientStats:
    requests: int = 0
    bytes_received: int = 0
    errors: int = 0
    # answers with a 5xx status (counted among errors too)
    server_errors: int = 0
    poll_latencies: list[float] = field(default_factory=list)
    part_requests: int = 0


@dataclass(frozen=True)
class ClientOptions:
    parallel_requests: int = 4
    max_orders_per_part_request: int = 3
    fallback_interval_s: float = 2.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    # the route's own rule (`route_distance_depended`): poll it this often while the car is
    # at most this far (m) from where it goes; farther, every `route_far_every_s`
    route_every_s: tuple[tuple[int, float], ...] = ((500, 2.0), (2_000, 5.0), (10_000, 10.0))
    route_far_every_s: float = 20.0
    poll_route: bool = True
    request_timeout_s: float = 5.0
    # > 0: waiting polls (docs/protocol.md: Waiting poll); 0: plain polling at the interval
    wait_ms: int = 0
    # a user change not seen this long: last-write-wins is retried once, versioned fails
    change_deadline_s: float = 15.0
    # launch with the required parts inline: every order renders from the launch answer
    extended_order_info: bool = True


VersionSeen = Callable[[str, str, int, float], None]
# how often the route loop of a waiting client looks whether a route is due
ROUTE_TICK_S = 1.0


def json_object(payload: bytes) -> dict[str, Any] | None:
    """The JSON object of an answer, or None for anything else."""
    try:
        answer = json.loads(payload)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def route_interval_s(distance_left_m: object, options: ClientOptions) -> float:
    """The route's polling interval for a car this far from where it goes: the nearest
    bracket's; unknown (no route yet) polls as often as the closest."""
    if not isinstance(distance_left_m, int | float):
        return options.route_every_s[0][1]
    for up_to_m, every_s in options.route_every_s:
        if distance_left_m <= up_to_m:
            return every_s
    return options.route_far_every_s


class Replicas:
    """The URLs of one service. A mobile app has one (its balancer); several are replicas
    reached directly (as the load test runs them), taken in turn request by request, the way
    a balancer does it: one that refused a connection is passed over for `down_s` (nginx's
    `max_fails=1 fail_timeout`), and the request is sent again at once to the next."""

    def __init__(self, urls: str | Sequence[str], down_s: float = 5.0) -> None:
        listed = [urls] if isinstance(urls, str) else list(urls)
        self.urls = [url.rstrip("/") for url in listed]
        self.down_s = down_s
        self._turn = itertools.count()
        self._down_until: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self.urls)

    def pick(self, avoid: str | None = None) -> str:
        now = time.monotonic()
        start = next(self._turn)
        for step in range(len(self.urls)):
            url = self.urls[(start + step) % len(self.urls)]
            if url != avoid and self._down_until.get(url, 0.0) <= now:
                return url
        # every one is down (or the only one): ask in turn anyway
        return self.urls[start % len(self.urls)]

    def failed(self, url: str) -> None:
        if len(self.urls) > 1:
            self._down_until[url] = time.monotonic() + self.down_s


class MlutpClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        launch_url: str | Sequence[str],
        orders_state_url: str | Sequence[str],
        user_id: str,
        supported_services: Iterable[str] = ("taxi", "eats", "grocery"),
        user_agent: str = "mlutp-reference-client/1.0",
        options: ClientOptions | None = None,
        on_version_seen: VersionSeen | None = None,
        rng: random.Random | None = None,
        features_url: str | None = None,
    ) -> None:
        self.session = session
        # the feature services' user change endpoints: {features_url}/{service}/{orderid}/{feature}
        self.features_url = features_url.rstrip("/") if features_url else None
        # (service, orderid, feature, "seen" | "failed"), in the order they were decided
        self.change_results: list[tuple[str, str, str, str]] = []
        self.point_at(launch_url, orders_state_url)
        self.user_id = user_id
        self.supported_services = list(supported_services)
        self.user_agent = user_agent
        self.options = options or ClientOptions()
        self.on_version_seen = on_version_seen
        self.rng = rng or random.Random()
        self.stats = ClientStats()
        self.rules: dict[str, list[Rule]] = {}
        # the policy version of each service whose rules the client holds (from launch)
        self.policy_versions: dict[str, str] = {}
        self.orders: list[Order] = []  # as shown, in order
        self.interval_s = self.options.fallback_interval_s
        # the last waiting poll may be followed by the next one at once
        self.poll_again_at_once = False
        self._parts_failed = False
        self._visible: dict[tuple[str, str], OrderView] = {}
        # the device's position (lon, lat) as the app knows it: sent with route requests
        self.position: tuple[float, float] | None = None
        # set by order_created: the next poll goes out now, a poll in flight is given up
        self._poll_now = asyncio.Event()

    def point_at(
        self, launch_url: str | Sequence[str], orders_state_url: str | Sequence[str]
    ) -> None:
        """Where the client sends its requests from now on: one URL of each (a balancer's),
        or the replicas of each (see Replicas). `launch_url` is the whole launch URL,
        `orders_state_url` the base the policy's part URLs are under."""
        self._launch = Replicas(launch_url)
        self._orders_state = Replicas(orders_state_url)

    # --- the protocol ----------------------------------------------------------------------

    async def launch(self) -> None:
        body: dict[str, Any] = {
            "supported_services": self.supported_services,
            "known_orders": self._known(),
        }
        if self.options.extended_order_info:
            body["supported"] = ["extended_order_info"]
        answer = await self._post(self._launch, "", body, poll=True)
        if answer is None:
            return
        state = answer["mlutp_orders_state"]
        self.policy_versions = dict(state.get("policy_versions", {}))
        self.rules = {}
        for raw in state["polling_policy"]:
            rule = Rule(**{**raw, "fields": tuple(raw["fields"])})
            if rule.part_type in SUPPORTED_PART_TYPES:  # unknown part types are ignored
                self.rules.setdefault(rule.service, []).append(rule)
        for rules in self.rules.values():
            rules.sort(key=lambda r: r.priority)
        await self._apply_state(state["orders"])

    async def cycle(self) -> None:
        """One poll, then the parts it asks for, then the visible state."""
        if not self.rules:
            await self.launch()
            return
        self._parts_failed = False
        answer = await self._poll_state()
        if answer is not None and self._policy_changed(answer.get("policy_versions", {})):
            # the server serves another policy now: fetch it at once, and the parts anew from
            # its endpoints (tags of the old version name parts the new policy may not have)
            for order in self.orders:
                order.parts = {}
            await self.launch()
            return
        if answer is not None:
            await self._apply_state(answer["orders"])
            # a part that failed keeps being needed: back to the interval, not a tight loop
            self.poll_again_at_once = self.poll_again_at_once and not self._parts_failed
        elif self.orders:
            # no answer at all: keep everything, show loaders
            for order in self.orders:
                order.update_status = "stale"
            self._publish(self.orders, set())
        await self._follow_changes()

    async def run(self, stop: asyncio.Event) -> None:
        """Cycle at the server's interval (or, waiting, right after each answer) until `stop`
        is set. A waiting poll in flight is abandoned when `stop` is set."""
        await self.launch()
        routes = asyncio.create_task(self._route_loop(stop)) if self.options.wait_ms else None
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                if not self.poll_again_at_once and not self._poll_now.is_set():
                    poll_now = asyncio.ensure_future(self._poll_now.wait())
                    await asyncio.wait(
                        [stopped, poll_now],
                        timeout=self.interval_s,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    poll_now.cancel()
                if stop.is_set():
                    return
                cycle = asyncio.ensure_future(self.cycle())
                await asyncio.wait([cycle, stopped], return_when=asyncio.FIRST_COMPLETED)
                if not cycle.done():
                    cycle.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await cycle
                    return
                cycle.result()
                if routes is None:
                    await self._poll_routes()
        finally:
            stopped.cancel()
            if routes is not None:
                routes.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await routes

    async def _route_loop(self, stop: asyncio.Event) -> None:
        """With waiting polls the poll loop may be held for long: the route keeps its own
        rhythm beside it."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=ROUTE_TICK_S)
            await self._poll_routes()

    async def _poll_state(self) -> dict[str, Any] | None:
        """orders/state with the orders known now. An order the user creates meanwhile is
        polled for at once: the request in flight (a held waiting poll, most likely) is given
        up for one that names it."""
        while True:
            self._poll_now.clear()
            body: dict[str, Any] = {
                "known_orders": self._known(),
                "supported_services": self.supported_services,
            }
            if self.options.wait_ms:
                body["wait_ms"] = self.options.wait_ms
            request = asyncio.ensure_future(
                self._post(
                    self._orders_state,
                    "/mlutp/v1/orders/state",
                    body,
                    poll=True,
                    extra_timeout_s=self.options.wait_ms * 1.1 / 1000,
                )
            )
            poll_now = asyncio.ensure_future(self._poll_now.wait())
            try:
                await asyncio.wait([request, poll_now], return_when=asyncio.FIRST_COMPLETED)
            finally:
                poll_now.cancel()
                if not request.done():
                    request.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await request
            if not self._poll_now.is_set():
                return request.result()
            # an answer to a request without the new order would drop it as finished

    def _policy_changed(self, versions: dict[str, str]) -> bool:
        return any(
            self.policy_versions.get(service) != version
            for service, version in versions.items()
            if service in self.rules
        )

    def order_created(self, service: str, orderid: str, status: str) -> None:
        """The user made an order in this app, which got its id back: it is shown (loading)
        and polled for at once, not found at the next launch or whenever a poll returns."""
        if any((o.service, o.orderid) == (service, orderid) for o in self.orders):
            return
        order = Order(orderid, service, status)
        self.orders.append(order)
        self._publish([order], set())
        self._poll_now.set()

    async def change(self, service: str, orderid: str, feature: str, value: Any) -> bool:
        """The user changes the order through its feature service: the order shows the new
        value at once, locked, and is polled with force until a part shows the change.
        False if the feature refused it (the result is in `change_results`)."""
        order = self._order(service, orderid)
        if order is None or self.features_url is None:
            return False
        pending = PendingChange(feature, value, time.monotonic() + self.options.change_deadline_s)
        if feature in LAST_WRITE_WINS:
            pending.idempotency_key = uuid.uuid4().hex
        order.pending_change = pending
        if not await self._send_change(order, pending):
            return False
        self._publish([order], set())
        return True

    async def _send_change(self, order: Order, pending: PendingChange) -> bool:
        body: dict[str, Any] = {"value": pending.value}
        if pending.idempotency_key is not None:
            body["idempotency_key"] = pending.idempotency_key
            body["requested_at_ms"] = int(time.time() * 1000)
        else:
            body["version"] = order.seen_version
        url = f"{self.features_url}/{order.service}/{order.orderid}/{pending.feature}"
        status, answer = await self._call(url, body)
        if status == 200 and answer is not None:
            pending.version, pending.conflict = answer["version"], False
            return True
        conflict = status == 409 and answer is not None and answer.get("code") == "version_conflict"
        if conflict and answer is not None and not pending.retried:
            # another device changed it first: catch up to that version, then retry once
            pending.version, pending.conflict = answer["current_version"], True
            return True
        self._change_done(order, "failed")
        return False

    async def _follow_changes(self) -> None:
        """After each poll: a change is seen (unlock), its conflict caught up (retry once), or
        its deadline passed (last-write-wins: retry once; versioned: failed)."""
        now = time.monotonic()
        for order in list(self.orders):
            pending = order.pending_change
            if pending is None:
                continue
            if pending.conflict:
                if pending.version is not None and order.seen_version >= pending.version:
                    pending.retried = True
                    pending.deadline = now + self.options.change_deadline_s
                    await self._send_change(order, pending)
                elif now >= pending.deadline:
                    self._change_done(order, "failed")
                continue
            if self._change_seen(order, pending):
                self._change_done(order, "seen")
            elif now >= pending.deadline:
                if pending.idempotency_key is not None and not pending.retried:
                    # the same key: if the first one did land, this changes nothing twice
                    pending.retried = True
                    pending.deadline = now + self.options.change_deadline_s
                    await self._send_change(order, pending)
                else:
                    self._change_done(order, "failed")

    def _change_seen(self, order: Order, pending: PendingChange) -> bool:
        field_name = pending.field
        if pending.idempotency_key is not None and field_name is not None:
            # last-write-wins: the requested value itself is what shows it
            return any(
                part.arrived and part.fields.get(field_name) == pending.value
                for part in order.parts.values()
            )
        return pending.version is not None and order.seen_version >= pending.version

    def _change_done(self, order: Order, outcome: str) -> None:
        """Seen or failed: the lock is released and force stops."""
        pending = order.pending_change
        if pending is not None and pending.feature is not None:
            self.change_results.append((order.service, order.orderid, pending.feature, outcome))
        order.pending_change = None
        self._publish([order], set())

    def _order(self, service: str, orderid: str) -> Order | None:
        for order in self.orders:
            if (order.service, order.orderid) == (service, orderid):
                return order
        return None

    def user_changed(self, service: str, orderid: str, version: int) -> None:
        """The user changed the order elsewhere and its feature returned `version`: lock the
        order and poll with force until a part shows it (or the deadline passes)."""
        order = self._order(service, orderid)
        if order is not None:
            deadline = time.monotonic() + self.options.change_deadline_s
            order.pending_change = PendingChange(None, None, deadline, version=version)
            self._publish([order], set())

    def view(self) -> list[OrderView]:
        return [
            self._visible[(o.service, o.orderid)]
            for o in self.orders
            if (o.service, o.orderid) in self._visible
        ]

    # --- internals -------------------------------------------------------------------------

    def _known(self) -> list[dict[str, Any]]:
        known = []
        for order in self.orders:
            entry: dict[str, Any] = {
                "orderid": order.orderid,
                "service": order.service,
                "status": order.status,
                "tags": {name: p.tag for name, p in order.parts.items() if p.tag},
            }
            if order.locked:
                entry["force"] = True
            known.append(entry)
        return known

    async def _apply_state(self, answered: list[dict[str, Any]]) -> None:
        by_key = {(o.service, o.orderid): o for o in self.orders}
        orders: list[Order] = []
        needed: dict[tuple[str, str], list[str]] = {}
        # parts that came inline (launch with extended order info): no request for them
        inlined: set[tuple[str, str, str]] = set()
        for item in answered:
            key = (item["service"], item["orderid"])
            order = by_key.get(key) or Order(item["orderid"], item["service"], item["status"])
            order.update_status = item["update_status"]
            order.change_capabilities = item.get("change_capabilities", {})
            if order.update_status == "actual":
                order.status = item["status"]
                order.brief = {k: v for k, v in item.items() if k not in STATE_KEYS}
                # tags the server did not echo are invalid: forget them
                for name, part in order.parts.items():
                    if name not in item["tags"]:
                        part.tag = None
                needed[key] = [
                    name for name in item["need_request"] if self._rule(order.service, name)
                ]
                for name, fields in item.get("parts", {}).items():
                    rule = self._rule(order.service, name)
                    if rule is not None:
                        order.parts.setdefault(name, Part())
                        if self._apply_part(order, rule, {**fields, "orderid": order.orderid}):
                            inlined.add((order.service, order.orderid, name))
            orders.append(order)
        # orders left out have finished
        self.orders = orders
        self._visible = {
            k: v for k, v in self._visible.items() if k in {(o.service, o.orderid) for o in orders}
        }
        arrived = await self._fetch_parts(needed) | inlined
        self._publish(orders, arrived, needed)

    def _rule(self, service: str, part_name: str) -> Rule | None:
        for rule in self.rules.get(service, ()):
            if rule.part_name == part_name:
                return rule
        return None

    async def _fetch_parts(
        self, needed: dict[tuple[str, str], list[str]]
    ) -> set[tuple[str, str, str]]:
        """Fetch by priority, batching orders per part, a few requests at a time. Returns
        (service, orderid, part) that arrived."""
        now = time.monotonic()
        batches: dict[str, tuple[Rule, list[Order]]] = {}
        orders = {(o.service, o.orderid): o for o in self.orders}
        for key, names in needed.items():
            order = orders[key]
            for name in names:
                rule = self._rule(order.service, name)
                part = order.parts.setdefault(name, Part())
                if rule is None or part.retry_at > now:  # backing off after errors
                    continue
                batches.setdefault(rule.url, (rule, []))[1].append(order)
        requests = []
        for rule, batch_orders in sorted(batches.values(), key=lambda b: b[0].priority):
            step = self.options.max_orders_per_part_request
            for start in range(0, len(batch_orders), step):
                requests.append((rule, batch_orders[start : start + step]))
        arrived: set[tuple[str, str, str]] = set()
        limit = asyncio.Semaphore(self.options.parallel_requests)

        async def fetch(rule: Rule, batch: list[Order]) -> None:
            async with limit:
                body = {"orders": [self._part_order(o, rule.part_name) for o in batch]}
                self.stats.part_requests += 1
                answer = await self._post(self._orders_state, rule.url, body)
                results = {r["orderid"]: r for r in answer["orders"]} if answer else {}
                for order in batch:
                    if self._apply_part(order, rule, results.get(order.orderid)):
                        arrived.add((order.service, order.orderid, rule.part_name))

        await asyncio.gather(*(fetch(rule, batch) for rule, batch in requests))
        return arrived

    @staticmethod
    def _part_order(order: Order, part_name: str) -> dict[str, str]:
        tag = order.parts[part_name].tag
        return {"orderid": order.orderid, "tag": tag} if tag else {"orderid": order.orderid}

    def _apply_part(self, order: Order, rule: Rule, result: dict[str, Any] | None) -> bool:
        part = order.parts[rule.part_name]
        now = time.monotonic()
        if result is None or "error" in result:
            if result is not None and result["error"].get("update_status") == "expired":
                self.orders = [o for o in self.orders if o is not order]
                return False
            part.stale = True
            part.failures += 1
            self._parts_failed = True
            backoff = min(
                self.options.backoff_cap_s, self.options.backoff_base_s * 2 ** (part.failures - 1)
            )
            part.retry_at = now + backoff * self.rng.uniform(0.5, 1.0)
            return False
        # the part's fields, exactly: one absent from the answer is deleted
        part.fields = {name: result[name] for name in rule.fields if name in result}
        part.tag = result.get("tag")
        part.arrived, part.stale, part.failures, part.retry_at = True, False, 0, 0.0
        part.fetched_at = now
        version = part.fields.get("version")
        if isinstance(version, int):
            self._saw_version(order, version)
        return True

    def _saw_version(self, order: Order, version: int) -> None:
        if version > order.seen_version:
            order.seen_version = version
            if self.on_version_seen is not None:
                self.on_version_seen(order.service, order.orderid, version, time.time())

    def _publish(
        self,
        orders: list[Order],
        arrived: set[tuple[str, str, str]],
        needed: dict[tuple[str, str], list[str]] | None = None,
    ) -> None:
        """Show the new state of an order only once its required parts asked for in this
        cycle have arrived; until then the previous view stays."""
        for order in orders:
            key = (order.service, order.orderid)
            rules = self.rules.get(order.service, [])
            required = [r.part_name for r in rules if r.required]
            waiting = [
                name
                for name in (needed or {}).get(key, [])
                if name in required and (order.service, order.orderid, name) not in arrived
            ]
            never_arrived = any(not order.parts.get(n, Part()).arrived for n in required)
            stale_fields: set[str] = set()
            for part in order.parts.values():
                if part.stale:
                    stale_fields.update(part.fields)
            held = self._visible.get(key)
            if waiting and held is not None:
                # hold the view; only say which of its fields are now known to be old
                self._visible[key] = dataclasses.replace(
                    held,
                    stale_fields=frozenset(stale_fields),
                    locked=order.locked,
                    change_capabilities=dict(order.change_capabilities),
                )
                continue
            data: dict[str, Any] = {}
            for part in order.parts.values():
                data.update(part.fields)
            pending = order.pending_change
            if pending is not None and pending.field is not None:
                # optimistic: the user sees what they asked for while it is on its way
                data[pending.field] = pending.value
            self._visible[key] = OrderView(
                orderid=order.orderid,
                service=order.service,
                status=order.status,
                update_status=order.update_status,
                loading=never_arrived or order.update_status == "stale",
                locked=order.locked,
                data=data,
                stale_fields=frozenset(stale_fields),
                brief=dict(order.brief),
                change_capabilities=dict(order.change_capabilities),
            )

    async def _poll_routes(self) -> None:
        """The route's own rule: while a taxi is on its way, often when the car is close and
        rarely when it is far (`route_interval_s`), with the app's own position and time."""
        if not self.options.poll_route:
            return
        now = time.monotonic()
        for order in list(self.orders):
            if order.status not in ROUTE_STATUSES or order.update_status != "actual":
                continue
            for rule in self.rules.get(order.service, []):
                if rule.polling_type != "route_distance_depended":
                    continue
                part = order.parts.setdefault(rule.part_name, Part())
                every_s = route_interval_s(part.fields.get("distance_left_m"), self.options)
                if now - part.fetched_at < every_s or part.retry_at > now:
                    continue
                body: dict[str, Any] = {
                    "orderid": order.orderid,
                    "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
                    "use_history": True,
                }
                if self.position is not None:
                    body["coordinates"] = list(self.position)
                answer = await self._post(self._orders_state, rule.url, body)
                self._apply_part(order, rule, answer)

    async def _call(self, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        """A feature service call: the status and the JSON answer, errors included (0, None
        when there was no answer)."""
        self.stats.requests += 1
        try:
            async with self.session.post(
                url,
                json=body,
                headers={"X-Yandex-UID": self.user_id, "User-Agent": self.user_agent},
                timeout=aiohttp.ClientTimeout(total=self.options.request_timeout_s),
            ) as response:
                payload = await response.read()
                self.stats.bytes_received += len(payload)
                answer = json_object(payload)
                return response.status, answer
        except (aiohttp.ClientError, TimeoutError):
            self.stats.errors += 1
            return 0, None

    async def _post(
        self,
        replicas: Replicas,
        path: str,
        body: dict[str, Any],
        *,
        poll: bool = False,
        extra_timeout_s: float = 0,
    ) -> dict[str, Any] | None:
        url = replicas.pick()
        answer, refused = await self._post_once(
            f"{url}{path}", body, poll=poll, extra_timeout_s=extra_timeout_s
        )
        if refused and len(replicas) > 1:
            # the replica is gone (killed, restarting): every request here is a read, so the
            # next replica is asked at once rather than the user waiting an interval
            replicas.failed(url)
            answer, _ = await self._post_once(
                f"{replicas.pick(avoid=url)}{path}",
                body,
                poll=poll,
                extra_timeout_s=extra_timeout_s,
            )
        return answer

    async def _post_once(
        self, url: str, body: dict[str, Any], *, poll: bool, extra_timeout_s: float
    ) -> tuple[dict[str, Any] | None, bool]:
        """The JSON answer (None on any failure), and whether the connection failed."""
        headers = {"X-Yandex-UID": self.user_id, "User-Agent": self.user_agent}
        started = time.monotonic()
        self.stats.requests += 1
        try:
            async with self.session.post(
                url,
                json=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(
                    total=self.options.request_timeout_s + extra_timeout_s
                ),
            ) as response:
                payload = await response.read()
                self.stats.bytes_received += len(payload)
                if poll:
                    self.stats.poll_latencies.append(time.monotonic() - started)
                    # never cached: every answer sets the next interval
                    interval = response.headers.get(INTERVAL_HEADER)
                    self.interval_s = (
                        int(interval) / 1000 if interval else self.options.fallback_interval_s
                    )
                    self.poll_again_at_once = (
                        response.headers.get(WAIT_HEADER) in POLL_AGAIN_AT_ONCE
                    )
                if poll and response.status == 503 and "Retry-After" in response.headers:
                    # shed by admission control: come back when the server says
                    self.interval_s = retry_after_seconds(
                        response.headers["Retry-After"], self.options.fallback_interval_s
                    )
                    self.poll_again_at_once = False
                if response.status != 200:
                    self.stats.errors += 1
                    self.stats.server_errors += response.status >= 500
                    return None, False
                answer: dict[str, Any] = await response.json(content_type=None)
                return answer, False
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            self.stats.errors += 1
            if poll:
                self.interval_s = self.options.fallback_interval_s
                self.poll_again_at_once = False
            # refused or dropped, not slow: a timeout asked again elsewhere would double it
            refused = isinstance(exc, aiohttp.ClientConnectionError) and not isinstance(
                exc, TimeoutError
            )
            return None, refused


def retry_after_seconds(value: str, fallback_s: float) -> float:
    """Retry-After in seconds (the services send whole seconds; an HTTP date is not used)."""
    try:
        return max(0.0, float(value))
    except ValueError:
        return fallback_s

"""The reference client of the order polling protocol (SPEC: Reference client and load tests).

Read it as documentation of the client half of the contract:

1. `launch()`: the short state of all active orders, and the polling policy.
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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

INTERVAL_HEADER = "X-Yataxi-Polling-Interval-Ms"
WAIT_HEADER = "X-Mlutp-Wait"
# the server waited or had news: the next waiting poll may go out at once
POLL_AGAIN_AT_ONCE = frozenset({"news", "wakeup", "timeout", "shutdown"})
SUPPORTED_PART_TYPES = frozenset({"totw", "eats_full", "grocery_full", "taxiroute"})
# keys of a state order that are not the source's brief fields
STATE_KEYS = frozenset({"orderid", "service", "status", "tags", "need_request", "update_status"})
ROUTE_STATUSES = frozenset({"driving", "waiting", "transporting"})


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
class Order:
    orderid: str
    service: str
    status: str
    update_status: str = "actual"
    # the source's brief fields (actual) or what we echo for ourselves (stale)
    brief: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Part] = field(default_factory=dict)
    # a user change waits to be seen: (version, deadline)
    pending_version: int | None = None
    seen_version: int = 0


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


@dataclass
class ClientStats:
    requests: int = 0
    bytes_received: int = 0
    errors: int = 0
    poll_latencies: list[float] = field(default_factory=list)
    part_requests: int = 0


@dataclass(frozen=True)
class ClientOptions:
    parallel_requests: int = 4
    max_orders_per_part_request: int = 3
    fallback_interval_s: float = 2.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    route_every_s: float = 2.0
    poll_route: bool = True
    request_timeout_s: float = 5.0
    # > 0: waiting polls (SPEC: Waiting poll); 0: plain polling at the interval
    wait_ms: int = 0


VersionSeen = Callable[[str, str, int, float], None]


class MlutpClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        launch_url: str,
        orders_state_url: str,
        user_id: str,
        supported_services: Iterable[str] = ("taxi", "eats", "grocery"),
        user_agent: str = "mlutp-reference-client/1.0",
        options: ClientOptions | None = None,
        on_version_seen: VersionSeen | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.session = session
        self.launch_url = launch_url
        self.orders_state_url = orders_state_url.rstrip("/")
        self.user_id = user_id
        self.supported_services = list(supported_services)
        self.user_agent = user_agent
        self.options = options or ClientOptions()
        self.on_version_seen = on_version_seen
        self.rng = rng or random.Random()
        self.stats = ClientStats()
        self.rules: dict[str, list[Rule]] = {}
        self.orders: list[Order] = []  # as shown, in order
        self.interval_s = self.options.fallback_interval_s
        # the last waiting poll may be followed by the next one at once
        self.poll_again_at_once = False
        self._parts_failed = False
        self._visible: dict[tuple[str, str], OrderView] = {}
        # set by order_created: the next poll goes out now, a poll in flight is given up
        self._poll_now = asyncio.Event()

    # --- the protocol ----------------------------------------------------------------------

    async def launch(self) -> None:
        body = {"supported_services": self.supported_services, "known_orders": self._known()}
        answer = await self._post(self.launch_url, body, poll=True)
        if answer is None:
            return
        state = answer["mlutp_orders_state"]
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
        if answer is not None:
            await self._apply_state(answer["orders"])
            # a part that failed keeps being needed: back to the interval, not a tight loop
            self.poll_again_at_once = self.poll_again_at_once and not self._parts_failed
        elif self.orders:
            # no answer at all: keep everything, show loaders
            for order in self.orders:
                order.update_status = "stale"
            self._publish(self.orders, set())

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
                await asyncio.wait_for(stop.wait(), timeout=self.options.route_every_s)
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
                    f"{self.orders_state_url}/mlutp/v1/orders/state",
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

    def order_created(self, service: str, orderid: str, status: str) -> None:
        """The user made an order in this app, which got its id back: it is shown (loading)
        and polled for at once, not found at the next launch or whenever a poll returns."""
        if any((o.service, o.orderid) == (service, orderid) for o in self.orders):
            return
        order = Order(orderid, service, status)
        self.orders.append(order)
        self._publish([order], set())
        self._poll_now.set()

    def user_changed(self, service: str, orderid: str, version: int) -> None:
        """The user changed the order and the feature returned `version`: lock the order and
        poll with force until a part shows it."""
        for order in self.orders:
            if (order.service, order.orderid) == (service, orderid):
                order.pending_version = version
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
            if order.pending_version is not None:
                entry["force"] = True
            known.append(entry)
        return known

    async def _apply_state(self, answered: list[dict[str, Any]]) -> None:
        by_key = {(o.service, o.orderid): o for o in self.orders}
        orders: list[Order] = []
        needed: dict[tuple[str, str], list[str]] = {}
        for item in answered:
            key = (item["service"], item["orderid"])
            order = by_key.get(key) or Order(item["orderid"], item["service"], item["status"])
            order.update_status = item["update_status"]
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
            orders.append(order)
        # orders left out have finished
        self.orders = orders
        self._visible = {
            k: v for k, v in self._visible.items() if k in {(o.service, o.orderid) for o in orders}
        }
        arrived = await self._fetch_parts(needed)
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
                answer = await self._post(f"{self.orders_state_url}{rule.url}", body)
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
        if order.pending_version is not None and version >= order.pending_version:
            order.pending_version = None  # the change is seen: unlock

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
                    locked=order.pending_version is not None,
                )
                continue
            data: dict[str, Any] = {}
            for part in order.parts.values():
                data.update(part.fields)
            self._visible[key] = OrderView(
                orderid=order.orderid,
                service=order.service,
                status=order.status,
                update_status=order.update_status,
                loading=never_arrived or order.update_status == "stale",
                locked=order.pending_version is not None,
                data=data,
                stale_fields=frozenset(stale_fields),
                brief=dict(order.brief),
            )

    async def _poll_routes(self) -> None:
        """The route's own rule: every `route_every_s` while a taxi is on its way."""
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
                if now - part.fetched_at < self.options.route_every_s or part.retry_at > now:
                    continue
                body = {"orderid": order.orderid, "use_history": True}
                answer = await self._post(f"{self.orders_state_url}{rule.url}", body)
                self._apply_part(order, rule, answer)

    async def _post(
        self, url: str, body: dict[str, Any], *, poll: bool = False, extra_timeout_s: float = 0
    ) -> dict[str, Any] | None:
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
                if response.status != 200:
                    self.stats.errors += 1
                    return None
                answer: dict[str, Any] = await response.json(content_type=None)
                return answer
        except (aiohttp.ClientError, TimeoutError, ValueError):
            self.stats.errors += 1
            if poll:
                self.interval_s = self.options.fallback_interval_s
                self.poll_again_at_once = False
            return None

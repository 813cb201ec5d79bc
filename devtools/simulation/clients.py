"""Simulated apps. `ProtocolClient` follows the reference client's rules (client/client.py,
docs/protocol.md: Writing a client): a launch first; then polls with its known orders in the
order shown, each with its tags, status and echo fields (its `created_at` and `version` among
them), at the interval the last answer gave, or at once after a waiting poll's news, wake-up,
timeout or shutdown; the parts in `need_request` fetched by priority, a few orders a request
and a few requests at a time; a part error marks the part stale and backs it off; `expired`
drops the order; an order made on this device is polled for at once (a held poll is given
up); after a user's change, `force` on the order until a part shows the change's version, or
15 s.
(devtools/simulation/misbehaving.py has the client that does not; network.py how both reach
the replicas.)
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec

from devtools.simulation.bff import PollReply
from devtools.simulation.network import Network
from services.orders_state.waiting.polls import WaitCause
from shared.answer import ActualOrder
from shared.policy import PartRule, PollingPolicy
from shared.wire import OrderKey

T = TypeVar("T")
SUPPORTED = ["taxi", "eats", "grocery"]
FALLBACK_INTERVAL_S = 2.0
PARALLEL_REQUESTS = 4
ORDERS_PER_PART_REQUEST = 3
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
CHANGE_DEADLINE_S = 15.0
# after these causes a waiting client polls again at once (client/model.py)
AGAIN_AT_ONCE = frozenset({WaitCause.NEWS, WaitCause.WAKEUP, WaitCause.TIMEOUT, WaitCause.SHUTDOWN})


class ClientObserver(Protocol):
    def client_saw(self, client: str, key: OrderKey, status: str, t: float) -> None: ...

    def client_version(self, client: str, key: OrderKey, version: int, t: float) -> None: ...

    def client_orders(self, client: str, keys: Sequence[OrderKey], t: float) -> None: ...

    def client_promise(self, client: str, sent: float, t: float, next_within_s: float) -> None:
        """The poll sent at `sent` was answered at `t`; the next will have looked within
        `next_within_s` (plain: its interval; waiting: at once, then held at most a wait)."""
        ...

    def client_polled(self, client: str, t: float) -> None: ...


@dataclass
class Part:
    tag: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    failures: int = 0
    retry_at: float = 0.0


@dataclass
class Pending:
    """A user's change on its way: the version that shows it, and until when to force."""

    version: int
    deadline: float


@dataclass
class Order:
    service: str
    orderid: str
    status: str
    update_status: str = "actual"
    created_at: str | None = None
    # the source's version of the last actual answer: echoed, so no answer goes back from it
    version: int | None = None
    brief: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Part] = field(default_factory=dict)
    seen_version: int = 0
    pending: Pending | None = None

    @property
    def key(self) -> OrderKey:
        return OrderKey(self.service, self.orderid)

    def known(self) -> dict[str, Any]:
        entry: dict[str, Any] = dict(self.brief)
        if self.created_at is not None:
            entry["created_at"] = self.created_at
        if self.version is not None:
            entry["version"] = self.version
        entry.update(
            orderid=self.orderid,
            service=self.service,
            status=self.status,
            tags={name: part.tag for name, part in self.parts.items() if part.tag},
        )
        if self.pending is not None:
            entry["force"] = True
        return entry


class ProtocolClient:
    def __init__(
        self,
        name: str,
        user_id: str,
        wait_ms: int,
        policy: PollingPolicy,
        network: Network,
        observer: ClientObserver,
        rng: random.Random,
        *,
        at_once_after_expired: bool = False,
    ) -> None:
        self.name = name
        self.user_id = user_id
        self.wait_ms = wait_ms
        # the reference client polls again at once after a part answered `expired` (it drops
        # the order; the answer had news); this one polls at the interval, as after a part
        # that failed: a kept answer may list a finished order for up to list_max_age, and
        # polling at once would fetch its parts again and again (see tests/simulation)
        self.at_once_after_expired = at_once_after_expired
        self.network = network
        self.observer = observer
        self.rng = rng
        self.rules: dict[tuple[str, str], PartRule] = {
            (service, rule.part_name): rule
            for service, served in policy.services.items()
            for rule in served.rules
        }
        self.versions = {service: policy.version(service) for service in policy.services}
        self.orders: list[Order] = []
        self.interval_s = FALLBACK_INTERVAL_S
        self.again_at_once = False
        self._poll_now = asyncio.Event()
        # set while a waiting poll is out: resolved to give it up
        self._abandon: asyncio.Future[None] | None = None
        # user changes to make right after the next part fetch of their order
        self._after_fetch: list[tuple[OrderKey, Callable[[], Any]]] = []
        self.parts_failed = False

    @staticmethod
    def now() -> float:
        return asyncio.get_running_loop().time()

    # --- what the user does ----------------------------------------------------------------

    def order_created(self, key: OrderKey, status: str) -> None:
        """The user made an order on this device and got its id: shown (loading) and polled
        for at once."""
        if any(order.key == key for order in self.orders):
            return
        self.orders.append(Order(key.service, key.orderid, status))
        self._poll_now.set()
        if self._abandon is not None and not self._abandon.done():
            self._abandon.set_result(None)

    def order(self, key: OrderKey) -> Order | None:
        return next((order for order in self.orders if order.key == key), None)

    def user_changed(self, key: OrderKey, version: int) -> None:
        """The user's change landed with this version: locked, forced until a part shows it."""
        order = self.order(key)
        if order is not None:
            order.pending = Pending(version, self.now() + CHANGE_DEADLINE_S)

    def after_next_fetch(self, key: OrderKey, change: Callable[[], Any]) -> None:
        self._after_fetch.append((key, change))

    # --- the cycle ---------------------------------------------------------------------------

    async def run(self, start_t: float, end_t: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, start_t - loop.time()))
        await self.launch()
        # bounded by the run's end: each turn waits for the interval or polls at once after
        # an answer that took time (a held poll, or a look)
        while loop.time() < end_t:
            if not self.again_at_once and not self._poll_now.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(self.interval_s, end_t - loop.time())):
                        await self._poll_now.wait()
            if loop.time() >= end_t:
                return
            await self.poll()

    async def launch(self) -> None:
        body = {
            "supported_services": SUPPORTED,
            "known_orders": [order.known() for order in self.orders],
            "policy_versions": self.versions,
        }
        sent = self.now()
        reply: PollReply | None = await self.network.launch(self.user_id, body)
        await self._answered(reply, sent)

    async def poll(self) -> None:
        loop = asyncio.get_running_loop()
        # bounded: each turn is a poll given up for one naming an order made meanwhile
        for _ in range(100):
            self._poll_now.clear()
            body: dict[str, Any] = {
                "known_orders": [order.known() for order in self.orders],
                "supported_services": SUPPORTED,
                "policy_versions": self.versions,
                "wait_ms": self.wait_ms,
            }
            sent = self.now()
            self.observer.client_polled(self.name, sent)
            call = self.network.orders_state(self.user_id, body)
            if not self.wait_ms:
                # a plain poll is short: its answer is dropped if an order was made meanwhile
                reply = await call
                if not self._poll_now.is_set():
                    await self._answered(reply, sent)
                    return
                continue
            request = loop.create_task(call)
            abandon = loop.create_future()
            self._abandon = abandon
            await asyncio.wait([request, abandon], return_when=asyncio.FIRST_COMPLETED)
            self._abandon = None
            if request.done():
                await self._answered(request.result(), sent)
                return
            # an order made on this device: the answer to a request without it would drop it
            # as finished. The request is left to the server, as a closed connection is
            request.add_done_callback(_retrieve)

    async def _answered(self, reply: PollReply | None, sent: float) -> None:
        now = self.now()
        if reply is None or reply.status != 200:
            self.interval_s = (
                reply.retry_after_s + self.rng.random()
                if reply is not None and reply.retry_after_s
                else FALLBACK_INTERVAL_S
            )
            self.again_at_once = False
            self.observer.client_promise(self.name, sent, now, self.interval_s)
            for order in self.orders:
                order.update_status = "stale"
            return
        self.interval_s = reply.interval_ms / 1000
        self.again_at_once = reply.cause in AGAIN_AT_ONCE
        by_key = {order.key: order for order in self.orders}
        orders: list[Order] = []
        needed: dict[OrderKey, list[str]] = {}
        for answered in reply.orders:
            order = by_key.get(answered.key) or Order(
                answered.service, answered.orderid, answered.status
            )
            if isinstance(answered, ActualOrder):
                order.update_status = "actual"
                order.status = answered.status
                order.brief = dict(answered.brief)
                order.created_at = answered.created_at or order.created_at
                if answered.version is not None:
                    order.version = answered.version
                for name, part in order.parts.items():
                    if name not in answered.tags:
                        part.tag = None
                needed[order.key] = [
                    name for name in answered.need_request if (order.service, name) in self.rules
                ]
                self.observer.client_saw(self.name, order.key, order.status, now)
            else:
                order.update_status = "stale"
            orders.append(order)
        # left out: finished
        self.orders = orders
        self.observer.client_orders(self.name, [order.key for order in orders], now)
        self.parts_failed = False
        await self._fetch_parts(needed)
        self._follow_changes()
        if self.parts_failed:
            # a part that failed keeps being needed: back to the interval, not a tight loop
            self.again_at_once = False
        promise = self.wait_ms / 1000 * 17 / 16 if self.again_at_once else self.interval_s
        # the parts may have dropped an order (expired)
        self.observer.client_orders(self.name, [order.key for order in self.orders], self.now())
        self.observer.client_promise(self.name, sent, self.now(), promise)

    async def _fetch_parts(self, needed: dict[OrderKey, list[str]]) -> None:
        now = self.now()
        batches: dict[str, tuple[PartRule, list[Order]]] = {}
        fetched: set[OrderKey] = set()
        for key, names in needed.items():
            order = self.order(key)
            if order is None:
                continue
            for name in names:
                rule = self.rules[(order.service, name)]
                part = order.parts.setdefault(name, Part())
                if part.retry_at > now:
                    self.parts_failed = True
                    continue
                batches.setdefault(rule.url, (rule, []))[1].append(order)
        requests: list[tuple[PartRule, list[Order]]] = []
        for rule, orders in sorted(batches.values(), key=lambda batch: batch[0].priority):
            for start in range(0, len(orders), ORDERS_PER_PART_REQUEST):
                requests.append((rule, orders[start : start + ORDERS_PER_PART_REQUEST]))
        limit = asyncio.Semaphore(PARALLEL_REQUESTS)

        async def fetch(rule: PartRule, batch: list[Order]) -> None:
            async with limit:
                asked = [(o.orderid, o.parts[rule.part_name].tag) for o in batch]
                parts: list[dict[str, Any]] | None = await self.network.part(
                    self.user_id, rule.url, asked
                )
            results = {str(p["orderid"]): p for p in parts} if parts is not None else {}
            for order in batch:
                self._apply_part(order, rule, results.get(order.orderid))
                fetched.add(order.key)

        await asyncio.gather(*(fetch(rule, batch) for rule, batch in requests))
        if fetched:
            waiting = [(key, change) for key, change in self._after_fetch if key in fetched]
            self._after_fetch = [(k, c) for k, c in self._after_fetch if k not in fetched]
            for _, change in waiting:
                await change()

    def _apply_part(self, order: Order, rule: PartRule, result: dict[str, Any] | None) -> None:
        part = order.parts.setdefault(rule.part_name, Part())
        now = self.now()
        if result is None or "error" in result:
            if result is not None and result["error"].get("update_status") == "expired":
                self.orders = [o for o in self.orders if o is not order]
                self.parts_failed |= not self.at_once_after_expired
                return
            part.failures += 1
            backoff = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (part.failures - 1))
            part.retry_at = now + backoff * self.rng.uniform(0.5, 1.0)
            self.parts_failed = True
            return
        # the part's fields exactly: one absent from the answer is deleted
        part.fields = {name: result[name] for name in rule.fields if name in result}
        part.tag = result.get("tag")
        part.failures, part.retry_at = 0, 0.0
        version = _decoded(part.fields.get("version"))
        if isinstance(version, int) and version > order.seen_version:
            order.seen_version = version
            self.observer.client_version(self.name, order.key, version, now)

    def _follow_changes(self) -> None:
        """A change seen (a part shows its version) or past its deadline: unlocked, no
        more force."""
        now = self.now()
        for order in self.orders:
            pending = order.pending
            if pending is not None and (
                order.seen_version >= pending.version or now >= pending.deadline
            ):
                order.pending = None


def _decoded(value: Any) -> Any:
    """A part's field as the app reads it: the server passes the upstream's JSON through."""
    return msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()

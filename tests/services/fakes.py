"""In-memory stand-ins for the clients the engine and the part service are built with:
fast unit tests of the I/O around the protocol, each fake counting its calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from services.bff.metrics import BffMetrics
from services.bff.poll import Caller
from services.bff.ports import Fetched, FetchOutcome
from services.bff.tag_cache import TagCache
from shared import wire
from shared.errors import OrderTagsRejected, OrderTagsUnavailable
from shared.protocol.allowed_changes import SourceAllowance
from shared.protocol.circuit import CircuitBreaker
from shared.protocol.tags import made_tag
from shared.upstream_wire import SourceKnownOrder, SourceOrder, SourceResponse
from shared.wire import OrderKey


class FakeOrderTags:
    """order_tags as a dict; `down` makes every call fail like an unreachable service."""

    def __init__(self) -> None:
        self.stored: dict[OrderKey, dict[str, str]] = {}
        self.down = False
        # answer every read 400, like a request order_tags refuses
        self.refuse = False
        self.calls: list[str] = []  # "get" / "set", in order
        # whose order each is: named by the first create that says (a poll's, for the user its
        # source listed it for)
        self.owners: dict[OrderKey, str] = {}
        # how often each order was forced, by each user: its owner alone, as order_tags counts
        self.forced: dict[wire.ForcedOrder, int] = {}

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[wire.ListKey] = (),
        *,
        force: Sequence[wire.ForcedOrder] = (),
        force_per_minute: int = 0,
        deadline_s: float | None = None,
    ) -> wire.TagsGetResponse:
        """Order tags only: this fake keeps no lists (no service of it opts in). Force is
        counted per order and user for the fake's life (the real one: per minute)."""
        self.calls.append("get")
        if self.down:
            raise OrderTagsUnavailable("fake order_tags is down")
        if self.refuse or len(orders) > wire.MAX_BATCH:  # as the real service: a 400
            raise OrderTagsRejected(f"fake order_tags: {len(orders)} orders in one batch")
        honoured = []
        for forced in force:
            if self.owners.get(forced.key) != forced.user_id or forced.user_id is None:
                honoured.append(False)
                continue
            self.forced[forced] = self.forced.get(forced, 0) + 1
            honoured.append(self.forced[forced] <= force_per_minute)
        return wire.TagsGetResponse(
            orders=[
                wire.OrderTags(
                    key.service,
                    key.orderid,
                    dict(self.stored[key]) if key in self.stored else None,
                    owner=self.owners.get(key),
                )
                for key in orders
            ],
            lists=[],
            forced=honoured,
        )

    async def keep_answers(self, *args: object, **kwargs: object) -> None:
        self.calls.append("keep")

    async def set(
        self, service: str, orderid: str, tags: dict[str, str], *, only_if_absent: bool = False
    ) -> dict[str, str]:
        self.calls.append("set")
        if self.down:
            raise OrderTagsUnavailable("fake order_tags is down")
        current = self.stored.setdefault(OrderKey(service, orderid), {})
        for part, content in tags.items():
            if not (only_if_absent and part in current):
                current[part] = content
        return dict(current)

    async def create(self, orders: Sequence[wire.OrderParts]) -> dict[OrderKey, dict[str, str]]:
        self.calls.append("create")
        if self.down:
            raise OrderTagsUnavailable("fake order_tags is down")
        if len(orders) > wire.MAX_BATCH:
            raise OrderTagsRejected(f"fake order_tags: {len(orders)} orders in one batch")
        created = {}
        for order in orders:
            key = OrderKey(order.service, order.orderid)
            current = self.stored.setdefault(key, {})
            for part in order.parts:
                current.setdefault(part, made_tag(order.version))
            if order.user_id is not None:
                self.owners.setdefault(key, order.user_id)
            created[key] = dict(current)
        return created


def tag_cache(tags: FakeOrderTags) -> TagCache:
    return TagCache(tags, CircuitBreaker(5, 2.0), metrics())  # type: ignore[arg-type]


def metrics() -> BffMetrics:
    return BffMetrics(CollectorRegistry())


class FakeSource:
    """An order source with a fixed list of orders; None when it is unavailable."""

    def __init__(self, orders: Sequence[tuple[str, str, str]] = ()) -> None:
        # (orderid, status, created_at)
        self.orders = [SourceOrder(o, s, c, {}) for o, s, c in orders]
        self.available = True
        self.calls = 0
        # what each call was told of the client's known orders, and the list tag it was given
        self.told: list[list[SourceKnownOrder]] = []
        self.at_least: list[str | None] = []
        # the list tag it says it serves: None says nothing; "echo" says the one it was given
        self.list_tag: str | None = None

    async def list_active(
        self,
        caller: Caller,
        known: Sequence[SourceKnownOrder] = (),
        at_least: str | None = None,
    ) -> SourceResponse | None:
        self.calls += 1
        self.told.append(list(known))
        self.at_least.append(at_least)
        if not self.available:
            return None
        list_tag = at_least if self.list_tag == "echo" else self.list_tag
        return SourceResponse(
            self.orders, SourceAllowance(can_make_more_orders=True), list_tag=list_tag
        )


class GatedUpstream:
    """A part upstream that holds every call until `release` is set, so a test decides when
    a fetch ends; it records what happened before each call."""

    def __init__(self, log: list[str]) -> None:
        self.release = asyncio.Event()
        self.arrivals: asyncio.Queue[str] = asyncio.Queue()
        self.log = log
        self.bodies: list[dict[str, Any]] = []

    async def fetch(self, body: dict[str, Any], caller: Caller) -> Fetched:
        self.log.append("upstream")
        self.bodies.append(dict(body))
        self.arrivals.put_nowait(body["orderid"])
        await self.release.wait()
        document = {"orderid": body["orderid"], "status": "driving", "eta": 5, "comment": "hi"}
        return Fetched(FetchOutcome.OK, wire.encode(document))

    async def release_after(self, calls: int) -> None:
        """Lets every held call end once `calls` of them have arrived."""
        for _ in range(calls):
            await self.arrivals.get()
        self.release.set()

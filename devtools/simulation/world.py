"""The ground truth of a run: every user's orders as their services hold them (the primaries'
data), each source's list version by version (what a lagging replica serves), and the record
of every change with the moment its tags landed, which the invariants are checked against.

The actors that change it follow the protocol's order for writers: data first, tags second
(docs/protocol.md: Writing tags (order_tags)), each tag write delivered at least once
(devtools/simulation/writers.py): one the store refuses is retried until it lands, one whose
writer died is sent when it is back. The record says when each landed (None: not yet, or
given up, or lost with Options.lossy_writers): an invariant that speaks of a change "whose
tags were written" knows which were and when."""

from __future__ import annotations

import asyncio
import bisect
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devtools.simulation.documents import new_document
from devtools.simulation.store import SimTagStore
from devtools.simulation.vloop import WALL_EPOCH_S
from devtools.simulation.writers import TagWrites
from emulator.documents import LIFECYCLES, change_capabilities, order_limit
from shared.policy import PollingPolicy
from shared.protocol.allowed_changes import SourceAllowance
from shared.upstream_wire import SourceOrder, SourceResponse
from shared.wire import OrderKey

# list versions kept per (service, user): a replica lags seconds, a list changes a few times
# a minute at most
HISTORY = 32
NOTHING_YET = SourceResponse([], SourceAllowance(can_make_more_orders=True))
# the fields a change of each kind writes (and so the parts whose tags it bumps)
STATUS_FIELDS = ("version", "status", "eta")
MOVE_FIELDS = ("version", "eta")
CHAT_FIELDS = ("chathistory",)
PERFORMER_FIELDS = ("orderperformerinfo",)
# the user changes of the taxi feature services: feature → the field it writes
FEATURE_FIELDS = {"comment": "comment", "tips": "tips"}


def created_at_text(t: float) -> str:
    """An RFC 3339 instant with milliseconds, as sources write `created_at`."""
    moment = datetime.fromtimestamp(WALL_EPOCH_S + t, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class StatusChange:
    """One change of an order's status (or its end): when the data changed and when each
    of its tag writes landed (None: failed or lost)."""

    key: OrderKey
    user_id: str
    status: str
    version: int
    data_t: float
    list_bump_t: float | None = None
    part_bump_t: float | None = None
    # the order left the list (finished or cancelled)
    finished: bool = False

    def parts_landed(self, t: float) -> None:
        self.part_bump_t = t

    def list_landed(self, t: float) -> None:
        self.list_bump_t = t


@dataclass
class UserChange:
    """A user's change through a feature service: the version it returned."""

    key: OrderKey
    user_id: str
    feature: str
    version: int
    data_t: float
    part_bump_t: float | None = None

    def parts_landed(self, t: float) -> None:
        self.part_bump_t = t


@dataclass
class SimOrder:
    key: OrderKey
    user_id: str
    created_t: float
    created_at: str
    status: str
    document: dict[str, Any]
    finished_t: float | None = None
    # when its tags (with its owner) were first written, and its list bump after creation
    tags_written_t: float | None = None
    created_bump_t: float | None = None
    # when each change of its document was made: its revision is how many were made (a
    # part's data is checked against the revision of the content tag it is answered under)
    changes: list[float] = field(default_factory=list)

    def change(self, document: dict[str, Any], t: float) -> None:
        self.document = document
        self.changes.append(t)

    @property
    def revision(self) -> int:
        return len(self.changes)

    def revision_at(self, t: float) -> int:
        """The revision of its data at `t` (a change made at `t` counted)."""
        return bisect.bisect_right(self.changes, t)

    @property
    def version(self) -> int:
        version: int = self.document["version"]
        return version

    def active_at(self, t: float) -> bool:
        return self.created_t <= t and (self.finished_t is None or t < self.finished_t)


@dataclass
class ListVersion:
    # when the data changed (virtual seconds)
    at: float
    answer: SourceResponse
    # the list tag bumped for it; None until the bump lands (or when it failed)
    tag: str | None = None


@dataclass
class Writes:
    """How often the run's writers die between their data and their tags (the bump_loss
    fault): the write is sent when they are back, or lost with lossy writers."""

    part_bump_loss: float = 0.0
    list_bump_loss: float = 0.0


class World:
    def __init__(
        self,
        policy: PollingPolicy,
        store: SimTagStore,
        rng: random.Random,
        writes: Writes,
        *,
        lossy_writers: bool = False,
        writers_rng: random.Random | None = None,
    ) -> None:
        self.policy = policy
        self.store = store
        self.rng = rng
        self.writes = writes
        self.outbox = TagWrites(writers_rng or random.Random(0), self.now, lossy=lossy_writers)
        self.orders: dict[OrderKey, SimOrder] = {}
        self.by_user: dict[str, list[SimOrder]] = {}
        self.lists: dict[tuple[str, str], deque[ListVersion]] = {}
        self.status_changes: list[StatusChange] = []
        self.user_changes: list[UserChange] = []
        # every list bump that landed: (when, service, user)
        self.list_bumps: list[tuple[float, str, str]] = []
        # every part tag write that landed: (when, order, the parts written)
        self.part_bumps: list[tuple[float, OrderKey, tuple[str, ...]]] = []
        self._sequence = 0

    @staticmethod
    def now() -> float:
        return asyncio.get_running_loop().time()

    # --- what the sources serve -------------------------------------------------------

    def active(self, user_id: str, service: str) -> list[SimOrder]:
        return [
            order
            for order in self.by_user.get(user_id, ())
            if order.key.service == service and order.finished_t is None
        ]

    def listing(self, service: str, user_id: str) -> SourceResponse:
        """What the service's primary lists for the user now."""
        active = self.active(user_id, service)
        if len(active) < order_limit(service):
            allowed = SourceAllowance(can_make_more_orders=True)
        else:
            allowed = SourceAllowance(False, "active_orders_limit")
        return SourceResponse(
            [
                SourceOrder(
                    order.key.orderid,
                    order.status,
                    order.created_at,
                    {"title": f"{service} {order.key.orderid}"},
                    change_capabilities(service, order.status),
                    version=order.version,
                )
                for order in active
            ],
            allowed,
        )

    def as_of(self, service: str, user_id: str, lag_s: float) -> ListVersion:
        """The version a replica `lag_s` behind the primary serves."""
        versions = self.lists.get((service, user_id))
        if not versions:
            return ListVersion(0.0, NOTHING_YET)
        replicated = self.now() - lag_s
        older = [version for version in versions if version.at <= replicated]
        if older:
            return older[-1]
        return versions[0] if len(versions) == HISTORY else ListVersion(0.0, NOTHING_YET)

    def document(self, key: OrderKey, user_id: str) -> dict[str, Any] | None:
        """An order's document as its part upstreams serve it to this user; None when they
        do not know it for the user (a 404: gone, or not the user's)."""
        order = self.orders.get(key)
        if order is None or order.user_id != user_id or order.finished_t is not None:
            return None
        return order.document

    # --- the writers: data first, tags second ------------------------------------------

    def _list_changed(self, service: str, user_id: str) -> ListVersion:
        version = ListVersion(self.now(), self.listing(service, user_id))
        versions = self.lists.setdefault((service, user_id), deque(maxlen=HISTORY))
        versions.append(version)
        return version

    async def _settle(self) -> None:
        """The few milliseconds between a writer's data and its tag write."""
        await asyncio.sleep(0.001 + self.rng.random() * 0.004)

    async def _bump_list(
        self,
        service: str,
        user_id: str,
        version: ListVersion,
        record: Callable[[float], None] = lambda _: None,
    ) -> None:
        await self._settle()
        died = self.rng.random() < self.writes.list_bump_loss

        async def attempt() -> None:
            version.tag = await self.store.bump_list(service, user_id)

        def landed() -> None:
            self.list_bumps.append((self.now(), service, user_id))
            record(self.now())

        await self.outbox.deliver(
            ("list", service, user_id), attempt, landed, died=died, merges=True
        )

    async def _bump_parts(
        self,
        key: OrderKey,
        fields: tuple[str, ...],
        record: Callable[[float], None] = lambda _: None,
    ) -> None:
        await self._settle()
        died = self.rng.random() < self.writes.part_bump_loss
        parts = self.policy.services[key.service].parts_holding(fields)

        async def attempt() -> None:
            await self.store.bump(key.service, key.orderid, parts)

        def landed() -> None:
            self.part_bumps.append((self.now(), key, tuple(parts)))
            record(self.now())

        await self.outbox.deliver(key, attempt, landed, died=died, given_up=self._finished(key))

    def _finished(self, key: OrderKey) -> Callable[[], bool]:
        order = self.orders[key]
        return lambda: order.finished_t is not None

    def new_orderid(self, service: str) -> str:
        self._sequence += 1
        return f"{service[0]}{self._sequence:04d}"

    async def create(self, user_id: str, service: str, orderid: str) -> SimOrder:
        """The order core makes an order: its data, then its tags (naming its owner, so its
        user's polls keep it for the created grace), then the user's list tag."""
        now = self.now()
        key = OrderKey(service, orderid)
        status = LIFECYCLES[service][0]
        document = new_document(service, orderid, created_at_text(now), status)
        order = SimOrder(key, user_id, now, created_at_text(now), status, document)
        self.orders[key] = order
        self.by_user.setdefault(user_id, []).append(order)
        version = self._list_changed(service, user_id)
        await self._settle()

        async def attempt() -> None:
            await self.store.set_tags(
                service, orderid, self.policy.services[service].tagged_parts, owner=user_id
            )

        def landed() -> None:
            order.tags_written_t = self.now()

        await self.outbox.deliver(key, attempt, landed, given_up=self._finished(key))

        def bumped(t: float) -> None:
            order.created_bump_t = t

        await self._bump_list(service, user_id, version, bumped)
        return order

    async def advance(self, key: OrderKey, *, cancel: bool = False) -> StatusChange | None:
        """The next status (or the end: cancelled, or the last status reached): data, then
        the parts' tags (or, at the end, the order's tags deleted), then the list tag."""
        order = self.orders[key]
        if order.finished_t is not None:
            return None
        lifecycle = LIFECYCLES[key.service]
        position = lifecycle.index(order.status)
        finished = cancel or position + 1 >= len(lifecycle) - 1
        status = "cancelled" if cancel else lifecycle[position + 1]
        document = dict(order.document)
        document["version"] = order.version + 1
        document["status"] = status
        document["eta"] = self.rng.randint(1, 30)
        order.change(document, self.now())
        order.status = status
        change = StatusChange(key, order.user_id, status, order.version, self.now())
        change.finished = finished
        if finished:
            order.finished_t = self.now()
        self.status_changes.append(change)
        version = self._list_changed(key.service, order.user_id)
        if finished:
            await self._settle()

            async def attempt() -> None:
                await self.store.delete(key.service, key.orderid)

            def deleted() -> None:
                change.part_bump_t = self.now()

            await self.outbox.deliver(key, attempt, deleted, supersedes=True)
        else:
            await self._bump_parts(key, STATUS_FIELDS, change.parts_landed)
        await self._bump_list(key.service, order.user_id, version, change.list_landed)
        return change

    async def touch(self, key: OrderKey, kind: str) -> None:
        """A feature service's change that the user did not ask for (the car moved, a chat
        message, the performer's info): data, then the parts holding it."""
        order = self.orders[key]
        if order.finished_t is not None:
            return
        document = dict(order.document)
        fields: tuple[str, ...]
        if kind == "move":
            document["version"] = order.version + 1
            document["eta"] = self.rng.randint(1, 30)
            fields = MOVE_FIELDS
        elif kind == "chat":
            document["chathistory"] = [*document.get("chathistory", []), self._sequence_text()]
            fields = CHAT_FIELDS
        else:
            document["orderperformerinfo"] = {"rating": self.rng.randint(40, 50) / 10}
            fields = PERFORMER_FIELDS
        if key.service != "taxi":
            # one part holds everything of a place order
            fields = ("version",)
            document["version"] = order.version + 1
        order.change(document, self.now())
        await self._bump_parts(key, fields)

    async def change_by_user(self, key: OrderKey, feature: str, value: Any) -> UserChange | None:
        """A user's change through its feature: data, then the parts; returns the new
        version the app waits to see. None when the order is gone."""
        order = self.orders.get(key)
        if order is None or order.finished_t is not None:
            return None
        document = dict(order.document)
        document["version"] = order.version + 1
        field_name = FEATURE_FIELDS.get(feature, "comment")
        document[field_name] = value
        order.change(document, self.now())
        change = UserChange(key, order.user_id, feature, order.version, self.now())
        self.user_changes.append(change)
        await self._bump_parts(key, ("version", field_name), change.parts_landed)
        return change

    def _sequence_text(self) -> str:
        self._sequence += 1
        return f"m{self._sequence}"

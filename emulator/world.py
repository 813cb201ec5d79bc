"""The emulated world: users' orders, their documents and lifecycles. Pure state, no I/O:
every mutation returns the `DataChange` that feature services then publish as tags."""

from __future__ import annotations

import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from emulator import documents
from emulator.documents import LIFECYCLES


def iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class UnknownOrder(LookupError):
    pass


class InvalidChange(ValueError):
    pass


@dataclass(frozen=True)
class DataChange:
    """One change of an order's data: which top-level fields, at which version, when."""

    seq: int
    service: str
    orderid: str
    version: int
    fields: frozenset[str]
    at: float
    user_id: str
    # the order's status after the change
    status: str
    # the order's first change: it was just created (its app knows it at once)
    created: bool = False


@dataclass
class Order:
    service: str
    orderid: str
    user_id: str
    created_at: str
    status: str
    doc: dict[str, Any]
    driver_position: list[float] | None = None

    @property
    def version(self) -> int:
        version: int = self.doc["version"]
        return version

    @property
    def finished(self) -> bool:
        return self.status == LIFECYCLES[self.service][-1]

    def brief(self) -> dict[str, Any]:
        if self.service == "taxi":
            return documents.taxi_brief(self.doc)
        return documents.place_brief(self.doc)


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    # optional fields come and go: absent, not null
    return {key: value for key, value in values.items() if value is not None}


@dataclass
class World:
    orders: dict[tuple[str, str], Order] = field(default_factory=dict)
    # each user's orders: a source's answer must not scan every order of every user
    by_user: dict[str, list[Order]] = field(default_factory=dict)
    changes: deque[DataChange] = field(default_factory=lambda: deque(maxlen=200_000))
    _seq: int = 0

    def create(
        self, user_id: str, service: str, status: str | None = None
    ) -> tuple[Order, DataChange]:
        lifecycle = LIFECYCLES[service]
        if status is not None and status not in lifecycle:
            raise InvalidChange(f"{service} has no status {status!r}; one of {lifecycle}")
        orderid = uuid.uuid4().hex
        now = iso_now()
        if service == "taxi":
            doc = documents.new_taxi_document(orderid, now)
        else:
            doc = documents.new_place_document(service, orderid, now)
        order = Order(service, orderid, user_id, now, lifecycle[0], _without_none(doc))
        self.orders[(service, orderid)] = order
        self.by_user.setdefault(user_id, []).append(order)
        while status is not None and order.status != status:
            self._apply(order, self._status_fields(order, self._next_status(order)))
        # a new order's every part is new, present fields or absent ones alike
        every_field = documents.TOTW_FIELDS if service == "taxi" else documents.PLACE_FIELDS
        return order, self._record(order, every_field, created=True)

    def get(self, service: str, orderid: str, user_id: str | None = None) -> Order:
        order = self.orders.get((service, orderid))
        if order is None or (user_id is not None and order.user_id != user_id):
            # another user's order is as unknown as a missing one
            raise UnknownOrder(f"no {service} order {orderid!r}")
        return order

    def active(self, user_id: str, service: str) -> list[Order]:
        return [
            order
            for order in self.by_user.get(user_id, ())
            if order.service == service and not order.finished
        ]

    def all_active(self) -> list[Order]:
        return [order for order in self.orders.values() if not order.finished]

    def advance(self, service: str, orderid: str) -> DataChange:
        order = self.get(service, orderid)
        if order.finished:
            raise InvalidChange(f"order {orderid!r} is already {order.status}")
        return self._change(order, self._status_fields(order, self._next_status(order)))

    def change(self, service: str, orderid: str, fields: dict[str, Any]) -> DataChange:
        order = self.get(service, orderid)
        known = documents.TOTW_FIELDS if service == "taxi" else documents.PLACE_FIELDS
        unknown = set(fields) - known
        if unknown:
            raise InvalidChange(f"unknown {service} fields: {sorted(unknown)}")
        if "version" in fields or "status" in fields:
            raise InvalidChange("version and status change only through the lifecycle")
        return self._change(order, fields)

    def move_driver(self, order: Order, position: list[float]) -> dict[str, Any]:
        order.driver_position = position
        return documents.route_document(order.doc, position, iso_now())

    def route(self, order: Order) -> dict[str, Any]:
        position = order.driver_position or order.doc["source"]["point"]
        return documents.route_document(order.doc, position, iso_now())

    def _next_status(self, order: Order) -> str:
        lifecycle = LIFECYCLES[order.service]
        return lifecycle[lifecycle.index(order.status) + 1]

    def _status_fields(self, order: Order, status: str) -> dict[str, Any]:
        now = iso_now()
        if order.service == "taxi":
            return documents.taxi_status_fields(order.doc, status, order.orderid, now)
        return documents.place_status_fields(order.service, status, order.orderid, now)

    def _apply(self, order: Order, fields: dict[str, Any]) -> frozenset[str]:
        changed = {"version"}
        for name, value in fields.items():
            if value is None:
                if name in order.doc:
                    del order.doc[name]
                    changed.add(name)
            elif order.doc.get(name) != value:
                order.doc[name] = value
                changed.add(name)
        order.doc["version"] = order.version + 1
        order.status = order.doc["status"]
        return frozenset(changed)

    def _change(self, order: Order, fields: dict[str, Any]) -> DataChange:
        return self._record(order, self._apply(order, fields))

    def _record(
        self, order: Order, changed: frozenset[str], *, created: bool = False
    ) -> DataChange:
        self._seq += 1
        change = DataChange(
            self._seq,
            order.service,
            order.orderid,
            order.version,
            changed,
            time.time(),
            order.user_id,
            order.status,
            created,
        )
        self.changes.append(change)
        return change

"""The emulated world: users' orders, their documents and lifecycles. Pure state, no I/O:
every mutation returns the `DataChange` that feature services then publish as tags."""

from __future__ import annotations

import copy
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from emulator import documents
from emulator.documents import lifecycle
from shared.tag_outbox import Outbox


def iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class UnknownOrder(LookupError):
    pass


class InvalidChange(ValueError):
    pass


class NotAllowed(InvalidChange):
    """The order's status does not allow this change now (its change capability says why)."""

    def __init__(self, feature: str, reason: str) -> None:
        super().__init__(f"{feature} is not allowed now: {reason}")
        self.reason = reason


class VersionConflict(InvalidChange):
    """A versioned change made on a version older than the feature's last change."""

    def __init__(self, feature: str, current_version: int) -> None:
        super().__init__(f"{feature} changed at version {current_version}; change it from there")
        self.current_version = current_version


@dataclass(frozen=True)
class Feature:
    """A feature service's change a user makes: the totw field it writes, the change
    capability that allows it, and whether it is versioned or last-write-wins."""

    field: str
    capability: str
    versioned: bool


FEATURES: dict[str, dict[str, Feature]] = {
    "taxi": {
        "destination": Feature("destinations", "change_destination", versioned=True),
        "comment": Feature("comment", "comment", versioned=True),
        "tips": Feature("tips", "add_tips", versioned=False),
    },
}


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
    # a completed taxi order stays listed until the user rates it
    awaiting_rating: bool = False
    # the user cancelled it: it leaves the active orders at once
    cancelled: bool = False
    # versioned features: the data version of each one's last change
    feature_versions: dict[str, int] = field(default_factory=dict)
    # last-write-wins features: idempotency key → the version its request left, and the
    # request time of each feature's latest applied change
    idempotency: dict[str, int] = field(default_factory=dict)
    last_write_ms: dict[str, int] = field(default_factory=dict)
    # the document before its last change: what a read replica one version behind serves
    previous_doc: dict[str, Any] | None = None

    @property
    def version(self) -> int:
        version: int = self.doc["version"]
        return version

    @property
    def finished(self) -> bool:
        """Gone from the user's active orders: cancelled, or at the end of its lifecycle and
        rated."""
        if self.cancelled:
            return True
        return self.status == lifecycle(self.service)[-1] and not self.awaiting_rating

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
    # the tag writes of the changes not yet known to have landed, recorded with each change
    # (a real feature service: a table written in the data's transaction); the features'
    # TagWriter sends them
    outbox: Outbox = field(default_factory=Outbox)
    _seq: int = 0

    def create(
        self, user_id: str, service: str, status: str | None = None
    ) -> tuple[Order, DataChange]:
        statuses = lifecycle(service)
        if status is not None and status not in statuses:
            raise InvalidChange(f"{service} has no status {status!r}; one of {statuses}")
        orderid = uuid.uuid4().hex
        now = iso_now()
        if service == "taxi":
            doc = documents.new_taxi_document(orderid, now)
        else:
            doc = documents.new_place_document(service, orderid, now)
        order = Order(service, orderid, user_id, now, statuses[0], _without_none(doc))
        self.orders[(service, orderid)] = order
        self.by_user.setdefault(user_id, []).append(order)
        while status is not None and order.status != status:
            self._apply(order, self._status_fields(order, self._next_status(order)))
        # a new order's every part is new, present fields or absent ones alike
        every_field = documents.TOTW_FIELDS if service == "taxi" else documents.PLACE_FIELDS
        # recorded by `commit`, once the creating call is done (its tags are written): the
        # moment the user's app has the order's id
        return order, self._new_change(order, every_field, created=True)

    def commit(self, change: DataChange) -> DataChange:
        """Record a creation now: numbered and timed as it is recorded, so a reader of the
        record that goes by sequence numbers never skips it."""
        self._seq += 1
        committed = replace(change, seq=self._seq, at=time.time())
        self.changes.append(committed)
        return committed

    def get(self, service: str, orderid: str, user_id: str | None = None) -> Order:
        order = self.orders.get((service, orderid))
        if order is None or (user_id is not None and order.user_id != user_id):
            # another user's order is as unknown as a missing one
            raise UnknownOrder(f"no {service} order {orderid!r}")
        return order

    def find(self, orderid: str, user_id: str) -> Order | None:
        """The user's order of that id, of any service (another user's is not found)."""
        for order in self.by_user.get(user_id, ()):
            if order.orderid == orderid:
                return order
        return None

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
        if order.status == lifecycle(service)[-1]:
            raise InvalidChange(f"order {orderid!r} is already {order.status}")
        change = self._change(order, self._status_fields(order, self._next_status(order)))
        # a finished trip awaits its rating, and the user sees it until then
        order.awaiting_rating = service == "taxi" and order.status == lifecycle(service)[-1]
        return change

    def rate(self, service: str, orderid: str, user_id: str, rating: int) -> DataChange:
        order = self.get(service, orderid, user_id)
        if not order.awaiting_rating:
            raise NotAllowed("feedback", "not_awaiting_rating")
        change = self._change(order, {"feedback": {"rating": rating, "rated": True}})
        order.awaiting_rating = False
        return change

    def cancel(self, service: str, orderid: str, user_id: str) -> DataChange:
        """The user cancels the order, where its `cancel` capability allows it."""
        order = self.get(service, orderid, user_id)
        capability = documents.change_capabilities(service, order.status).get("cancel")
        if capability is None or not capability.allowed:
            reason = capability.reason if capability is not None else None
            raise NotAllowed("cancel", reason or "not_allowed")
        # the data says so (and its part's tag is bumped, so a waiting poll wakes up)
        cancelled = {"status_info": {"text": "Cancelled", "translations": {}}, "cancel_rules": None}
        change = self._change(order, cancelled)
        order.cancelled = True
        return change

    def user_change(
        self,
        service: str,
        orderid: str,
        user_id: str,
        name: str,
        value: Any,
        *,
        known_version: int | None = None,
        idempotency_key: str | None = None,
        requested_at_ms: int = 0,
    ) -> tuple[DataChange | None, int]:
        """A user's change through a feature service: the change made (None if nothing
        changed) and the data version the client waits for.

        Versioned: refused (VersionConflict) when the feature changed after `known_version`.
        Last-write-wins: a repeated idempotency key changes nothing twice; a request older
        than the latest applied one changes nothing."""
        order = self.get(service, orderid, user_id)
        feature = FEATURES.get(service, {}).get(name)
        if feature is None:
            raise InvalidChange(f"{service} has no feature {name!r}")
        capability = documents.change_capabilities(service, order.status).get(feature.capability)
        if capability is not None and not capability.allowed:
            raise NotAllowed(name, capability.reason or "not_allowed")
        if feature.versioned:
            if known_version is None:
                raise InvalidChange(f"{name} is versioned: send the version you know")
            changed_at = order.feature_versions.get(name, 0)
            if changed_at > known_version:
                raise VersionConflict(name, changed_at)
            change = self._change(order, {feature.field: value})
            order.feature_versions[name] = change.version
            return change, change.version
        if idempotency_key is None:
            raise InvalidChange(f"{name} is last-write-wins: send an idempotency key")
        if idempotency_key in order.idempotency:
            return None, order.idempotency[idempotency_key]
        if requested_at_ms < order.last_write_ms.get(name, 0):
            # a later request already won
            order.idempotency[idempotency_key] = order.version
            return None, order.version
        change = self._change(order, {feature.field: value})
        order.last_write_ms[name] = requested_at_ms
        order.idempotency[idempotency_key] = change.version
        return change, change.version

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

    def place_driver(self, order: Order, distance_left_m: int) -> dict[str, Any]:
        """The driver put this far from the destination (east of it): a test's or a demo's
        way to bring the car close or take it far."""
        dest = order.doc["destinations"][0]["point"]
        return self.move_driver(order, [dest[0] + distance_left_m / 100_000, dest[1]])

    def route(self, order: Order) -> dict[str, Any]:
        position = order.driver_position or order.doc["source"]["point"]
        return documents.route_document(order.doc, position, iso_now())

    def _next_status(self, order: Order) -> str:
        statuses = lifecycle(order.service)
        return statuses[statuses.index(order.status) + 1]

    def _status_fields(self, order: Order, status: str) -> dict[str, Any]:
        now = iso_now()
        if order.service == "taxi":
            return documents.taxi_status_fields(order.doc, status, order.orderid, now)
        return documents.place_status_fields(order.service, status, order.orderid, now)

    def _apply(self, order: Order, fields: dict[str, Any]) -> frozenset[str]:
        order.previous_doc = copy.deepcopy(order.doc)
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

    def _record(self, order: Order, changed: frozenset[str]) -> DataChange:
        change = self._new_change(order, changed)
        self.changes.append(change)
        return change

    def _new_change(
        self, order: Order, changed: frozenset[str], *, created: bool = False
    ) -> DataChange:
        if not created:
            self._seq += 1
        return DataChange(
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

"""Wire types of the emulator: its upstream APIs and its control API."""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec

from emulator.faults import FaultMode
from shared.wire import ContentTag, OrderId, PartName, ServiceName

UserId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
# the largest integer every JSON parser holds exactly (JavaScript's Number.MAX_SAFE_INTEGER)
MAX_SAFE_INTEGER = 2**53 - 1
SafeCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]


# a taxi content tag: the order_proc version it was written for
_VERSION_TAG = re.compile(r"^v[0-9]{1,15}$")


class Position(msgspec.Struct):
    """The app's position as the design note has it: `point` [lon, lat] and `dx`, its
    accuracy in metres. Fields beside them are ignored, as a newer app's would be."""

    point: tuple[float, float]
    dx: Annotated[float, msgspec.Meta(ge=0)]


class OrderRequest(msgspec.Struct):
    """totw, eats/grocery details: other fields of the body are accepted and ignored. `tags`:
    the content tags the client holds for the parts this call serves; `at_least`: those
    order_tags held before the call (both recorded in stats). A taxi content tag `v<N>` asks
    for data of order_proc version N or newer. `position`, when sent, must be the design's
    object: a real totw would misread another shape (a bare [lon, lat], or null), so a client
    sending one is told so here with a 400 rather than served as if it were right."""

    orderid: OrderId
    tags: dict[PartName, ContentTag] = {}
    at_least: dict[PartName, ContentTag] = {}
    position: Position | msgspec.UnsetType = msgspec.UNSET

    def asked_version(self) -> int:
        """The newest order_proc version the call names (0: none)."""
        versions = [
            int(content[1:])
            for content in (*self.tags.values(), *self.at_least.values())
            if _VERSION_TAG.match(content)
        ]
        return max(versions, default=0)


class CreateOrder(msgspec.Struct, forbid_unknown_fields=True):
    user_id: UserId
    service: ServiceName
    status: str | None = None


class CreatedOrder(msgspec.Struct):
    orderid: str
    service: str
    status: str
    version: int
    created_at: str


class ChangeFields(msgspec.Struct, forbid_unknown_fields=True):
    fields: Annotated[dict[str, Any], msgspec.Meta(min_length=1)]


class Changed(msgspec.Struct):
    orderid: str
    service: str
    status: str
    version: int
    changed_fields: list[str]
    tags: dict[str, str]


class FaultRequest(msgspec.Struct, forbid_unknown_fields=True):
    target: str
    mode: FaultMode
    delay_ms: Annotated[int, msgspec.Meta(ge=0, le=60_000)] = 0


class DriverRequest(msgspec.Struct, forbid_unknown_fields=True):
    enabled: bool


class DriverDistance(msgspec.Struct, forbid_unknown_fields=True):
    """Where a taxi order's driver is put: this far from the order's destination, on the
    route's own measure (`distance_left_m`)."""

    distance_left_m: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]


class VersionedChange(msgspec.Struct, forbid_unknown_fields=True):
    """A versioned feature's change (destination, comment): the data version the client holds."""

    version: SafeCount
    value: Any = None


class LastWriteWinsChange(msgspec.Struct, forbid_unknown_fields=True):
    """A last-write-wins feature's change (tips): a repeated idempotency key changes nothing
    twice; the latest request by the time the user made it wins."""

    idempotency_key: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    value: Any = None
    requested_at_ms: SafeCount = 0


class Feedback(msgspec.Struct, forbid_unknown_fields=True):
    rating: Annotated[int, msgspec.Meta(ge=1, le=5)]


class Cancel(msgspec.Struct, forbid_unknown_fields=True):
    """A cancel takes nothing but the order it names."""


class UserChanged(msgspec.Struct):
    orderid: str
    feature: str
    # the data version to wait for: a part showing it (or later) shows the change
    version: int

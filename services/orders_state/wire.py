"""Wire types of the part endpoints."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from services.bff.wire import ClientTagText
from shared.wire import OrderId


class PartOrder(msgspec.Struct, forbid_unknown_fields=True):
    orderid: OrderId
    tag: ClientTagText | None = None


class PartRequest(msgspec.Struct):
    """The legacy totw request for 1–3 orders. Other fields go to the upstream untouched."""

    orders: list[PartOrder]


class RouteRequest(msgspec.Struct):
    orderid: OrderId
    coordinates: Annotated[list[float], msgspec.Meta(min_length=2, max_length=2)] | None = None
    timestamp: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    use_history: bool = False
    tag: ClientTagText | None = None


class PartResponse(msgspec.Struct):
    orders: list[dict[str, Any]]

"""Wire types of the part endpoints."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.wire import ClientTagText, OrderId


class PartOrder(msgspec.Struct, forbid_unknown_fields=True):
    orderid: OrderId
    tag: ClientTagText | None = None


class PartRequest(msgspec.Struct):
    """The legacy totw request for 1–3 orders. Other fields go to the upstream untouched."""

    orders: list[PartOrder]


class PartResponse(msgspec.Struct):
    orders: list[dict[str, Any]]

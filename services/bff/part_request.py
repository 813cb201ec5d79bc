"""A part request as the client sends it: the legacy totw request for 1–3 orders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from services.bff.wire import PartRequest
from shared import wire
from shared.errors import BadRequest


@dataclass(frozen=True)
class RequestedOrder:
    orderid: str
    client_tag: str | None


@dataclass(frozen=True)
class ParsedPartRequest:
    orders: list[RequestedOrder]
    # passed to the upstream untouched (position, supported, format_currency, ...)
    other_fields: dict[str, Any]


def parse_part_request(body: Mapping[str, Any], max_orders: int) -> ParsedPartRequest:
    try:
        request = msgspec.convert(body, PartRequest)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"invalid request: {exc}", code="invalid_request") from exc
    if not 1 <= len(request.orders) <= max_orders:
        raise BadRequest(
            f"a part request takes 1 to {max_orders} orders, not {len(request.orders)}",
            code="bad_orders_count",
        )
    orderids = [order.orderid for order in request.orders]
    if len(set(orderids)) != len(orderids):
        raise BadRequest("an order is listed twice", code="duplicate_order")
    other_fields = {name: value for name, value in body.items() if name != "orders"}
    wire.check_depth(other_fields, "the request")
    return ParsedPartRequest(
        orders=[RequestedOrder(order.orderid, order.tag) for order in request.orders],
        other_fields=other_fields,
    )

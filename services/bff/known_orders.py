"""Validation of the client's known_orders: limits and types; pure, no I/O. A service the
server does not serve is not bad input: it is unavailable for the request (the engine)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from services.bff.wire import KNOWN_ORDER_FIELDS, MAX_SUPPORTED_SERVICES, KnownOrder
from shared import wire
from shared.errors import BadRequest
from shared.protocol.limits import Limits
from shared.wire import SERVICE_NAME_PATTERN, OrderKey


@dataclass(frozen=True)
class ParsedKnownOrder:
    order: KnownOrder
    # the client's own extra fields, echoed back only to it when its order is stale
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> OrderKey:
        return OrderKey(self.order.service, self.order.orderid)


def parse_known_orders(items: Sequence[dict[str, Any]], limits: Limits) -> list[ParsedKnownOrder]:
    if len(items) > limits.max_known_orders:
        raise BadRequest(
            f"known_orders has {len(items)} orders; at most {limits.max_known_orders} are allowed",
            code="too_many_orders",
        )
    known_orders: list[ParsedKnownOrder] = []
    seen: set[OrderKey] = set()
    for index, item in enumerate(items):
        where = f"known_orders[{index}]"
        try:
            order = msgspec.convert(item, KnownOrder)
        except msgspec.ValidationError as exc:
            raise BadRequest(f"{where}: {exc}", code="invalid_request") from exc
        extras = {name: value for name, value in item.items() if name not in KNOWN_ORDER_FIELDS}
        wire.check_depth(extras, where)
        if len(extras) > limits.max_extra_fields:
            raise BadRequest(
                f"{where} has {len(extras)} extra fields; at most {limits.max_extra_fields}",
                code="too_many_fields",
            )
        if extras and len(wire.encode(extras)) > limits.max_extra_bytes:
            raise BadRequest(
                f"{where}: extra fields are over {limits.max_extra_bytes} bytes together",
                code="fields_too_large",
            )
        known_order = ParsedKnownOrder(order, extras)
        if known_order.key in seen:
            raise BadRequest(f"{where}: order {order.orderid!r} is listed twice")
        seen.add(known_order.key)
        known_orders.append(known_order)
    return known_orders


SERVICE_NAME = re.compile(SERVICE_NAME_PATTERN)


@dataclass(frozen=True)
class ParsedPoll:
    known_orders: list[ParsedKnownOrder]
    services: list[str]
    # names of supported_services not considered, by why: "malformed" (not a service name),
    # "past_limit" (after the first MAX_SUPPORTED_SERVICES)
    ignored: dict[str, int] = field(default_factory=dict)


def considered_services(names: Sequence[str] | None) -> tuple[list[str], dict[str, int]]:
    """The well-formed names among the first MAX_SUPPORTED_SERVICES of supported_services,
    and how many were ignored and why: the list says what the app can show, so one odd name
    (a placeholder, a name of a newer app) never costs the user their orders."""
    if not names:
        return [], {}
    considered = names[:MAX_SUPPORTED_SERVICES]
    kept = [name for name in considered if SERVICE_NAME.fullmatch(name)]
    ignored = {
        "malformed": len(considered) - len(kept),
        "past_limit": len(names) - len(considered),
    }
    return kept, {why: count for why, count in ignored.items() if count}


def queried_services(
    supported: Sequence[str] | None, known_orders: Sequence[ParsedKnownOrder]
) -> list[str]:
    """The services in supported_services plus those of known_orders, first seen first."""
    # a dict keeps the first-seen order and makes each name one lookup: linear in the list
    return list(
        dict.fromkeys(
            [*(supported or ()), *(known_order.order.service for known_order in known_orders)]
        )
    )


def parse_poll(
    limits: Limits,
    items: Sequence[dict[str, Any]],
    supported: Sequence[str] | None,
    *,
    only_supported: bool = False,
) -> ParsedPoll:
    """The known orders, validated, and the services the poll queries: those of
    `supported` (the well-formed among its first names) and of the known orders; with
    `only_supported` (launch) just `supported`, and known orders of other services are
    ignored."""
    known_orders = parse_known_orders(items, limits)
    names, ignored = considered_services(supported)
    if only_supported:
        services = queried_services(names, [])
        return ParsedPoll(
            [known_order for known_order in known_orders if known_order.order.service in services],
            services,
            ignored,
        )
    return ParsedPoll(known_orders, queried_services(names, known_orders), ignored)

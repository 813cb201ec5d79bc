"""The route part's own rule (`route_distance_depended`): while a taxi is on its way, polled
often when the car is close and rarely when it is far, with the app's own position and time."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from client.model import ROUTE_STATUSES, ClientOptions, Order, Part, Position, Rule

# how often the route loop of a waiting client looks whether a route is due
ROUTE_TICK_S = 1.0


def route_interval_s(distance_left_m: object, options: ClientOptions) -> float:
    """The route's polling interval for a car this far from where it goes: the nearest
    bracket's; unknown (no route yet) polls as often as the closest."""
    if not isinstance(distance_left_m, int | float):
        return options.route_every_s[0][1]
    for up_to_m, every_s in options.route_every_s:
        if distance_left_m <= up_to_m:
            return every_s
    return options.route_far_every_s


def routes_due(
    orders: Iterable[Order], rules: dict[str, list[Rule]], options: ClientOptions
) -> Iterator[tuple[Order, Rule]]:
    """The (order, route rule) pairs whose route is due now."""
    now = time.monotonic()
    for order in orders:
        if order.status not in ROUTE_STATUSES or order.update_status != "actual":
            continue
        for rule in rules.get(order.service, []):
            if rule.polling_type != "route_distance_depended":
                continue
            part = order.parts.setdefault(rule.part_name, Part())
            every_s = route_interval_s(part.fields.get("distance_left_m"), options)
            if now - part.fetched_at < every_s or part.retry_at > now:
                continue
            yield order, rule


def route_request(order: Order, position: Position | None) -> dict[str, Any]:
    """The request old apps send to taxiroute, plus the order it is for: taxiroute's own
    `coordinates`, the point alone (it has no field for the accuracy)."""
    body: dict[str, Any] = {
        "orderid": order.orderid,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "use_history": True,
    }
    if position is not None:
        body["coordinates"] = list(position.point)
    return body

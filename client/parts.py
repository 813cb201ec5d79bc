"""Parts: which requests fetch the parts an answer asks for (by priority, a few orders per
request, none for a part backing off after errors), and what a part answer does to an order
(its fields replaced exactly; an error marks it stale and backs it off; `expired` ends it)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from client.model import (
    POSITIONED_PART_TYPES,
    ClientOptions,
    Order,
    OrderKey,
    Part,
    Position,
    Rule,
)


class PartOutcome(Enum):
    ARRIVED = "arrived"
    FAILED = "failed"  # kept, marked stale, retried after a backoff
    EXPIRED = "expired"  # the order is gone


def part_requests(
    needed: Mapping[OrderKey, list[str]],
    orders: Mapping[OrderKey, Order],
    rule_of: Callable[[str, str], Rule | None],
    *,
    max_orders: int,
    now: float,
) -> tuple[list[tuple[Rule, list[Order]]], bool]:
    """The part requests to send, lowest priority number first: each part's orders in
    batches of at most `max_orders`; a part backing off after errors is not asked yet. And
    whether one was left out so: still needed, it sends the next poll to the interval, not
    at once (the same news again and again would be a tight loop)."""
    batches: dict[str, tuple[Rule, list[Order]]] = {}
    backing_off = False
    for key, names in needed.items():
        order = orders[key]
        for name in names:
            rule = rule_of(order.service, name)
            part = order.parts.setdefault(name, Part())
            if rule is not None and part.retry_at > now:
                backing_off = True
            if rule is None or part.retry_at > now:
                continue
            batches.setdefault(rule.url, (rule, []))[1].append(order)
    requests = []
    for rule, batch_orders in sorted(batches.values(), key=lambda b: b[0].priority):
        for start in range(0, len(batch_orders), max_orders):
            requests.append((rule, batch_orders[start : start + max_orders]))
    return requests, backing_off


def part_parameters(
    part_type: str, options: ClientOptions, position: Position | None
) -> dict[str, Any]:
    """What a part request of this part type carries beside `orders`, and what launch passes
    on for it (`part_parameters`)."""
    parameters = dict(options.part_parameters.get(part_type, {}))
    if part_type in POSITIONED_PART_TYPES and position is not None:
        parameters["position"] = position.wire()
    return parameters


def part_order(order: Order, part_name: str) -> dict[str, str]:
    """An order as a part request names it: with the tag of the part it holds, if any."""
    tag = order.parts[part_name].tag
    return {"orderid": order.orderid, "tag": tag} if tag else {"orderid": order.orderid}


def apply_part(
    order: Order,
    rule: Rule,
    result: Mapping[str, Any] | None,
    options: ClientOptions,
    rng: random.Random,
) -> PartOutcome:
    """One order's part answer (None: no answer) applied to the order's part."""
    part = order.parts.setdefault(rule.part_name, Part())
    now = time.monotonic()
    if result is None or "error" in result:
        if result is not None and result["error"].get("update_status") == "expired":
            return PartOutcome.EXPIRED
        part.stale = True
        part.failures += 1
        backoff = min(options.backoff_cap_s, options.backoff_base_s * 2 ** (part.failures - 1))
        part.retry_at = now + backoff * rng.uniform(0.5, 1.0)
        return PartOutcome.FAILED
    # `unchanged`: the part the app holds is current; it keeps its fields under the new tag
    # (not "every field absent"). Otherwise the part's fields, exactly: one absent from the
    # answer is deleted
    if result.get("unchanged") is not True:
        part.fields = {name: result[name] for name in rule.fields if name in result}
    part.tag = result.get("tag")
    part.arrived, part.stale, part.failures, part.retry_at = True, False, 0, 0.0
    part.fetched_at = now
    return PartOutcome.ARRIVED

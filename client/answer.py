"""What an answer (launch's or orders/state's) does to the orders the client holds: which
stay (one left out has finished), their status, brief fields and tags when `actual`, the
parts each asks for, and the parts that came inline. Data only: the client applies the
inline parts and fetches the rest."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from client.model import STATE_KEYS, Order, OrderKey, Part, Rule


@dataclass
class Merged:
    orders: list[Order]  # as shown, in the answer's order
    needed: dict[OrderKey, list[str]]  # the parts to request, of the rules the client holds
    # parts that came inline (launch with extended order info): no request for them
    inline: list[tuple[Order, Rule, dict[str, Any]]]


def merge_answer(
    held: Iterable[Order],
    answered: Iterable[dict[str, Any]],
    rule_of: Callable[[str, str], Rule | None],
) -> Merged:
    by_key = {o.key: o for o in held}
    merged = Merged([], {}, [])
    for item in answered:
        key = (item["service"], item["orderid"])
        order = by_key.get(key) or Order(item["orderid"], item["service"], item["status"])
        order.update_status = item["update_status"]
        order.change_capabilities = item.get("change_capabilities", {})
        if order.update_status == "actual":
            order.status = item["status"]
            order.brief = {k: v for k, v in item.items() if k not in STATE_KEYS}
            # tags the server did not echo are invalid: forget them
            for name, part in order.parts.items():
                if name not in item["tags"]:
                    part.tag = None
            merged.needed[key] = [
                name for name in item["need_request"] if rule_of(order.service, name)
            ]
            for name, fields in item.get("parts", {}).items():
                rule = rule_of(order.service, name)
                if rule is not None:
                    order.parts.setdefault(name, Part())
                    merged.inline.append((order, rule, {**fields, "orderid": order.orderid}))
        merged.orders.append(order)
    return merged

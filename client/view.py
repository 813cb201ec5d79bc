"""What a UI renders: an order's view changes only once the `required` parts asked for in
a cycle have arrived; until then the previous view stays (only which of its fields are now
known to be old, its lock and its capabilities are updated)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from client.model import Order, OrderKey, OrderView, Part, PartKey, Rule


class Views:
    def __init__(self) -> None:
        self._visible: dict[OrderKey, OrderView] = {}
        # called with the views just published: a UI renders them (each part as it lands)
        self.on_change: Callable[[list[OrderView]], None] | None = None

    def of(self, orders: Iterable[Order]) -> list[OrderView]:
        """The views of these orders, in their order (an order never shown yet has none)."""
        return [self._visible[o.key] for o in orders if o.key in self._visible]

    def keep_only(self, orders: Iterable[Order]) -> None:
        """Forget the views of orders no longer shown (finished)."""
        keys = {o.key for o in orders}
        self._visible = {k: v for k, v in self._visible.items() if k in keys}

    def publish(
        self,
        orders: Iterable[Order],
        rules: Mapping[str, list[Rule]],
        arrived: set[PartKey] | None = None,
        needed: Mapping[OrderKey, list[str]] | None = None,
    ) -> None:
        for order in orders:
            key = order.key
            required = [r.part_name for r in rules.get(order.service, []) if r.required]
            waiting = [
                name
                for name in (needed or {}).get(key, [])
                if name in required and (order.service, order.orderid, name) not in (arrived or ())
            ]
            never_arrived = any(not order.parts.get(n, Part()).arrived for n in required)
            stale_fields: set[str] = set()
            fields_of = {r.part_name: r.fields for r in rules.get(order.service, [])}
            for name, part in order.parts.items():
                if part.stale:
                    # every field of the rule, held or not: none of them is known to be new
                    stale_fields.update(fields_of.get(name, ()), part.fields)
            held = self._visible.get(key)
            if waiting and held is not None:
                # hold the view; only say which of its fields are now known to be old
                self._visible[key] = dataclasses.replace(
                    held,
                    stale_fields=frozenset(stale_fields),
                    locked=order.locked,
                    change_capabilities=dict(order.change_capabilities),
                )
                continue
            data: dict[str, Any] = {}
            for part in order.parts.values():
                data.update(part.fields)
            pending = order.pending_change
            if pending is not None and pending.field is not None:
                # optimistic: the user sees what they asked for while it is on its way
                data[pending.field] = pending.value
            self._visible[key] = OrderView(
                orderid=order.orderid,
                service=order.service,
                status=order.status,
                update_status=order.update_status,
                loading=never_arrived or order.update_status == "stale",
                locked=order.locked,
                data=data,
                stale_fields=frozenset(stale_fields),
                brief=dict(order.brief),
                change_capabilities=dict(order.change_capabilities),
            )
        if self.on_change is not None:
            self.on_change(self.of(orders))

"""The order of orders (docs/protocol.md: Orders and their order).

Orders of available sources go in canonical order: `created_at`, then `service`, then
`orderid`. Each stale order is then inserted right after the nearest order that precedes it
in `known_orders` and is already placed (at the front if there is none), taking stale orders
in `known_orders` order. So when the service comes back, nothing moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from shared.wire import OrderKey

T = TypeVar("T")


def canonical_key(created_at: str, service: str, orderid: str) -> tuple[str, str, str]:
    return (created_at, service, orderid)


def merge_orders(
    actual_in_canonical_order: Sequence[T],
    stale_in_known_order: Sequence[T],
    known_order_keys: Sequence[OrderKey],
    key: Callable[[T], OrderKey],
) -> list[T]:
    placed: list[T] = list(actual_in_canonical_order)
    position_in_known = {k: i for i, k in enumerate(known_order_keys)}
    for stale in stale_in_known_order:
        index = position_in_known[key(stale)]
        placed_keys = [key(item) for item in placed]
        insert_at = 0
        for preceding in reversed(known_order_keys[:index]):
            if preceding in placed_keys:
                insert_at = placed_keys.index(preceding) + 1
                break
        placed.insert(insert_at, stale)
    return placed

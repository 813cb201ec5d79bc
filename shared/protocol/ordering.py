"""The order of orders (docs/protocol.md: Orders and their order).

Orders of available sources go in canonical order: `created_at`, then `service`, then
`orderid`. A stale order whose client echoed a well-formed `created_at` (every actual order
carries it, and clients echo it) is placed by that same canonical key among them: exactly
where it will be when its service is back, whatever the client listed. A stale order without
one is inserted right after the nearest order that precedes it in `known_orders` and is
already placed (at the front if there is none), taking stale orders in `known_orders` order.
Either way, when the service comes back, nothing moves.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from shared.wire import OrderKey

T = TypeVar("T")

# (the instant, the text of a created_at that is no instant, service, orderid)
CanonicalKey = tuple[float, str, str, str]


def created_instant(created_at: str) -> float | None:
    """The instant a `created_at` names (RFC 3339, with its offset), or None if it names
    none: a stale order's echoed value is the client's, and only a well-formed one places it."""
    if not 20 <= len(created_at) <= 40:
        return None
    try:
        moment = datetime.fromisoformat(created_at)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


def canonical_key(created_at: str, service: str, orderid: str) -> CanonicalKey:
    """Created first, first; by the instant, so that sources writing it differently (with or
    without fractions, another offset) still agree. A source's created_at that names no
    instant sorts after every one that does, by its text."""
    instant = created_instant(created_at)
    if instant is None:
        return (math.inf, created_at, service, orderid)
    return (instant, "", service, orderid)


def merge_orders(
    actual_in_canonical_order: Sequence[T],
    stale_in_known_order: Sequence[T],
    known_order_keys: Sequence[OrderKey],
    key: Callable[[T], OrderKey],
    placed_by: Callable[[T], CanonicalKey | None],
) -> list[T]:
    """The answer's orders: `placed_by` is an order's canonical key (None for a stale order
    whose client echoed no well-formed created_at)."""
    placed: list[T] = list(actual_in_canonical_order)
    sort_keys: list[CanonicalKey] = []
    for order in placed:
        canonical = placed_by(order)
        assert canonical is not None, "an actual order always has its canonical key"
        sort_keys.append(canonical)
    by_neighbour: list[T] = []
    for stale in stale_in_known_order:
        canonical = placed_by(stale)
        if canonical is None:
            by_neighbour.append(stale)
            continue
        # where it will be when its service is back
        at = bisect.bisect_right(sort_keys, canonical)
        placed.insert(at, stale)
        sort_keys.insert(at, canonical)
    position_in_known = {k: i for i, k in enumerate(known_order_keys)}
    for stale in by_neighbour:
        index = position_in_known[key(stale)]
        placed_keys = [key(item) for item in placed]
        insert_at = 0
        for preceding in reversed(known_order_keys[:index]):
            if preceding in placed_keys:
                insert_at = placed_keys.index(preceding) + 1
                break
        placed.insert(insert_at, stale)
    return placed

"""The polling interval of one response (docs/protocol.md: Polling interval)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class IntervalRules:
    """The polling interval's numbers; the settings (ProtocolSettings.interval) read their
    defaults from here."""

    # "<service>:<status>" → base interval (from the polling policy); statuses not listed
    # get `default_base_ms`
    status_bases_ms: Mapping[str, int] = field(default_factory=dict)
    default_base_ms: int = 5000
    no_orders_ms: int = 30_000
    # with the tag cache down clients poll half as often (the protocol's figure)
    degraded_factor: float = 2.0
    # ±10 %: a fleet of apps started together (a deploy, a reconnect) spreads out
    jitter: float = 0.10
    min_ms: int = 1000
    max_ms: int = 60_000


def overload_factor(in_flight: int, soft_limit: int, max_factor: float = 4.0) -> float:
    """Load shedding by interval: past the soft limit of requests in flight, clients are
    told to poll proportionally less often, up to `max_factor`."""
    if soft_limit <= 0 or in_flight <= soft_limit:
        return 1.0
    return min(max_factor, in_flight / soft_limit)


def polling_interval_ms(
    orders: Iterable[tuple[str, str]],
    *,
    degraded: bool,
    overload: float,
    rng: random.Random,
    rules: IntervalRules,
) -> int:
    """`orders` are (service, status) pairs of the response."""
    bases = [rules.status_bases_ms.get(f"{s}:{st}", rules.default_base_ms) for s, st in orders]
    interval = float(min(bases)) if bases else float(rules.no_orders_ms)
    if degraded:
        interval *= rules.degraded_factor
    interval *= max(1.0, overload)
    # spread clients out so they do not poll in step
    interval *= rng.uniform(1 - rules.jitter, 1 + rules.jitter)
    return int(min(rules.max_ms, max(rules.min_ms, interval)))

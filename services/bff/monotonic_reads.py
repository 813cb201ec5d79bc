"""Monotonic reads in a look (docs/protocol.md: Orders and their order): the versions the
client echoed, the kept answers too old to stand for their source, and the per-process
bound on the source calls such echoes may cause. The rule is `shared.protocol.monotonic`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from services.bff.known_orders import ParsedKnownOrder
from shared.protocol.monotonic import echoed_version, orders_behind, version_check_allowed
from shared.upstream_wire import SourceResponse
from shared.wire import OrderKey


def echoed_versions(known_orders: Sequence[ParsedKnownOrder]) -> dict[OrderKey, int]:
    """The well-formed versions the client echoed, by order (its extra field `version`)."""
    echoed: dict[OrderKey, int] = {}
    for known_order in known_orders:
        version = echoed_version(known_order.extras.get("version"))
        if version is not None:
            echoed[known_order.key] = version
    return echoed


def behind(
    answers: Mapping[str, SourceResponse | None], echoed: Mapping[OrderKey, int]
) -> set[OrderKey]:
    """The orders these answers list at a version older than the client echoed."""
    if not echoed:
        return set()
    return orders_behind(
        (
            (OrderKey(service, order.orderid), order.version)
            for service, answer in answers.items()
            if answer is not None
            for order in answer.orders
        ),
        echoed,
    )


class VersionChecks:
    """When each (user, service) last had its kept answer set aside because it was older
    than an echo: at most one such source call per `min_ttl` per (user, service). Kept per
    process (a user's polls meet in one process: docs/protocol.md: A fleet), bounded in
    entries: one older than the TTL no longer bounds anything and goes, and past
    `max_entries` the oldest go first."""

    def __init__(self, min_ttl_ms: int, max_entries: int = 100_000) -> None:
        self.min_ttl_ms = min_ttl_ms
        self.max_entries = max_entries
        self._asked: OrderedDict[tuple[str, str], int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._asked)

    def allow(self, user_id: str, services: Iterable[str], now_ms: int) -> set[str]:
        """The services whose source may be asked now for a newer answer than the kept one,
        each recorded as asked now; the others stand on their kept answer (and the orders it
        gives older than their echo are stale)."""
        self._expire(now_ms)
        allowed: set[str] = set()
        for service in services:
            key = (user_id, service)
            if not version_check_allowed(
                self._asked.get(key), now_ms=now_ms, min_ttl_ms=self.min_ttl_ms
            ):
                continue
            allowed.add(service)
            self._asked.pop(key, None)
            self._asked[key] = now_ms
            while len(self._asked) > self.max_entries:
                self._asked.popitem(last=False)
        return allowed

    def _expire(self, now_ms: int) -> None:
        # entries are in the order they were asked: the oldest are first
        while self._asked:
            key, at_ms = next(iter(self._asked.items()))
            if 0 <= now_ms - at_ms < self.min_ttl_ms:
                return
            del self._asked[key]

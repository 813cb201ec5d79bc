"""The tag cache as the BFF sees it: order_tags behind a deadline and a circuit breaker,
so a dead cache costs nothing per request. `None` means unavailable: callers degrade."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from services.bff.metrics import BffMetrics
from shared.errors import OrderTagsUnavailable
from shared.order_tags_client import OrderTagsClient
from shared.protocol.circuit import CircuitBreaker
from shared.protocol.tags import new_content_tag
from shared.wire import OrderKey

StoredTags = dict[OrderKey, dict[str, str] | None]


class TagCache:
    def __init__(
        self,
        client: OrderTagsClient,
        circuit: CircuitBreaker,
        metrics: BffMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.circuit = circuit
        self.metrics = metrics
        self.clock = clock

    async def get(self, orders: Sequence[OrderKey]) -> StoredTags | None:
        if not orders:
            return {}
        if not self.circuit.allow(self.clock()):
            self.metrics.tag_cache.labels("circuit_open").inc()
            return None
        try:
            stored = await self.client.get(orders)
        except OrderTagsUnavailable:
            self.circuit.failure(self.clock())
            self.metrics.tag_cache.labels("unavailable").inc()
            self.metrics.circuit_open.set(int(self.circuit.is_open))
            return None
        except BaseException:
            # cancelled mid-call: no verdict on the cache, but never leave a probe hanging
            self.circuit.abandon()
            raise
        self.circuit.success()
        self.metrics.tag_cache.labels("ok").inc()
        self.metrics.circuit_open.set(0)
        return stored

    async def create_missing(
        self, missing: dict[OrderKey, list[str]]
    ) -> dict[OrderKey, dict[str, str]]:
        """Create content tags for the parts an order lacks (all of them when it is new or
        expired), only where absent, so a feature's tag written meanwhile wins. Returns every
        tag stored afterwards for each order."""

        async def create(key: OrderKey, parts: list[str]) -> dict[str, str] | None:
            try:
                created = {part: new_content_tag() for part in parts}
                return await self.client.set(key.service, key.orderid, created, only_if_absent=True)
            except OrderTagsUnavailable:
                return None

        keys = [key for key, parts in missing.items() if parts]
        results = await asyncio.gather(*(create(key, missing[key]) for key in keys))
        self.metrics.tags_created.inc(sum(1 for r in results if r is not None))
        return {key: tags for key, tags in zip(keys, results, strict=True) if tags is not None}

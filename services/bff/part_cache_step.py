"""The shared part cache's step of a part request (docs/protocol.md: Part endpoints, stage 4):
a part the cache keeps for the requesting user, the same question to the upstream and the
content tag current now is answered from it, on any replica, with no upstream call (a hit;
otherwise a miss, fetched); a part an upstream call answered is kept (put) under the content
tag read before the call and the question it asked. The cache itself is behind the
`SharedParts` port (services/bff/part_cache.py over Redis)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import msgspec

from services.bff.metrics import BffMetrics
from services.bff.order_fetch import NOT_READ, OrderFetch, Preread
from services.bff.part_request import RequestedOrder
from services.bff.poll import Caller
from services.bff.ports import KeptPart, PartKey, SharedParts
from services.bff.tag_cache import TagCache
from shared.policy import PartEndpoint
from shared.protocol.parts import kept_part_serves
from shared.wire import OrderKey, PartData

# what a part answer holds beside the part's fields
_ENVELOPE = frozenset({"orderid", "tag"})


class PartCacheStep:
    def __init__(
        self, shared_parts: SharedParts, tag_cache: TagCache, metrics: BffMetrics, *, ttl_ms: int
    ) -> None:
        self.shared_parts = shared_parts
        self.tag_cache = tag_cache
        self.metrics = metrics
        self.ttl_ms = ttl_ms

    async def kept(
        self,
        endpoint: PartEndpoint,
        orders: Sequence[RequestedOrder],
        params: str,
        caller: Caller,
        preread: Preread,
    ) -> tuple[Preread, dict[str, tuple[str, KeptPart]]]:
        """The orders whose part the shared cache keeps for this user and question under the
        content tag current now (shared.protocol.parts.kept_part_serves): that content tag
        and the kept part, its fields and the moment of its fetch (the answer's tag). The
        tags are read first (the read the fetches of the rest use): the cache is asked only
        under a content tag read before."""
        if not orders:
            return preread, {}
        if preread is NOT_READ:
            preread = await self.tag_cache.get(
                [OrderKey(endpoint.service, order.orderid) for order in orders]
            )
        if preread is None:
            return None, {}
        part_name = endpoint.rule.part_name
        asked = [
            (order, content)
            for order in orders
            if (
                content := (preread.get(OrderKey(endpoint.service, order.orderid)) or {}).get(
                    part_name
                )
            )
            is not None
        ]
        if not asked:
            return preread, {}
        found = await self.shared_parts.get(
            [
                PartKey(endpoint.service, order.orderid, part_name, caller.user_id, params)
                for order, _ in asked
            ]
        )
        now_ms = int(time.time() * 1000)
        hits: dict[str, tuple[str, KeptPart]] = {}
        for (order, content), kept in zip(asked, found, strict=True):
            served = kept is not None and kept_part_serves(
                kept.content,
                kept.issued_ms,
                content,
                now_ms=now_ms,
                ttl_ms=self.ttl_ms,
            )
            self._count(endpoint, "hit" if served else "miss")
            if kept is not None and served:
                hits[order.orderid] = content, kept
        return preread, hits

    def _count(self, endpoint: PartEndpoint, outcome: str) -> None:
        self.metrics.part_cache.labels(endpoint.service, endpoint.rule.part_name, outcome).inc()

    async def keep(
        self,
        endpoint: PartEndpoint,
        kept: Sequence[tuple[str, OrderFetch, PartData]],
        caller: Caller,
    ) -> None:
        """The parts this request's upstream calls answered, kept for every replica under the
        content tag read before each call and the question the call asked."""
        if not kept:
            return
        part_name = endpoint.rule.part_name
        entries = []
        for orderid, fetch, part in kept:
            content = fetch.stored.get(part_name) if fetch.stored else None
            if content is None:
                continue
            fields = {name: value for name, value in part.items() if name not in _ENVELOPE}
            entries.append(
                (
                    PartKey(endpoint.service, orderid, part_name, caller.user_id, fetch.params),
                    KeptPart(content, fetch.issued_ms, msgspec.json.encode(fields)),
                )
            )
            self._count(endpoint, "stored")
        await self.shared_parts.put(entries)

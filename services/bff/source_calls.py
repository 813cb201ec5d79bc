"""A look's calls to the order sources: each source told the client's known orders of its
service (with the content tags the client holds) and the list tag read before the call; the
calls of one user's polls that read the same list tag joined into one (docs/protocol.md: List
tags)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

from services.bff.coalesce import Coalesced
from services.bff.known_orders import ParsedKnownOrder
from services.bff.metrics import BffMetrics
from services.bff.poll import Poll
from services.bff.ports import OrderSource
from shared.protocol.tags import known_content_tags
from shared.upstream_wire import SourceKnownOrder, SourceResponse


def known_by_source(
    known_orders: Sequence[ParsedKnownOrder],
    served: Sequence[str],
    versions: Mapping[str, str],
    now_ms: int,
) -> dict[str, list[SourceKnownOrder]]:
    """The client's known orders of each served service as its source is told of them: with
    the content tags the client holds, never the server's tags."""
    told: dict[str, list[SourceKnownOrder]] = {service: [] for service in served}
    for known_order in known_orders:
        orders = told.get(known_order.order.service)
        if orders is not None:
            content_tags = known_content_tags(
                known_order.order.tags, versions[known_order.order.service], now_ms
            )
            orders.append(SourceKnownOrder(known_order.order.orderid, content_tags))
    return told


class SourceCalls:
    def __init__(self, sources: Mapping[str, OrderSource], metrics: BffMetrics) -> None:
        self.sources = sources
        self.metrics = metrics
        # the source calls in flight per (service, user, list tag read)
        self._asking: Coalesced[tuple[str, str, str], SourceResponse | None] = Coalesced()

    async def ask(
        self,
        services: Sequence[str],
        poll: Poll,
        versions: Mapping[str, str],
        list_tags: Mapping[str, str],
    ) -> tuple[dict[str, SourceResponse | None], set[str]]:
        """Each served service's source, told the list tag read before the call (`list_tags`);
        a service the server does not serve is unavailable for this request (None), like a
        source that failed. Also the services whose answer this poll shared with another's
        call (that poll keeps it)."""
        served = [service for service in services if service in self.sources]
        told = known_by_source(poll.known_orders, served, versions, int(time.time() * 1000))
        caller = poll.caller

        async def ask(service: str) -> tuple[SourceResponse | None, bool]:
            source, list_tag = self.sources[service], list_tags.get(service)
            if list_tag is None:
                return await source.list_active(caller, told[service]), False
            # however many polls of the user find its kept answer missing or expired at
            # once (devices, tabs, the polls a bump wakes), the source is asked once: those
            # that read the same list tag share the answer
            return await self._asking.run(
                (service, caller.user_id, list_tag),
                lambda: source.list_active(caller, told[service], list_tag),
            )

        results = await asyncio.gather(*(ask(service) for service in served))
        answers: dict[str, SourceResponse | None] = dict.fromkeys(services)
        shared: set[str] = set()
        for service, (result, joined) in zip(served, results, strict=True):
            outcome = "ok" if result else "unavailable"
            self.metrics.source_call(service, f"coalesced_{outcome}" if joined else outcome).inc()
            answers[service] = result
            if joined:
                shared.add(service)
        return answers, shared

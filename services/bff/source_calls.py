"""A look's sources, asked now or kept (docs/protocol.md: List tags): each source a kept answer
does not stand for is asked, told the client's known orders of its service (with the content
tags the client holds) and the list tag read before the call, the calls of one user's polls
that read the same list tag joined into one; then which answers are current, which known
orders their sources do not list yet or give older than their client echoed, and the current
answers kept for later polls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.bff.coalesce import Coalesced
from services.bff.known_orders import ParsedKnownOrder
from services.bff.listings import Listings, current_answers, lagging_orders
from services.bff.metrics import BffMetrics
from services.bff.monotonic_reads import behind
from services.bff.poll import Poll
from services.bff.ports import OrderSource
from services.bff.tag_cache import TagsRead
from shared.protocol.look import answers_to_keep
from shared.protocol.ordering import canonical_key
from shared.protocol.tags import known_content_tags
from shared.upstream_wire import SourceKnownOrder, SourceOrder, SourceResponse
from shared.wire import OrderKey


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


@dataclass(frozen=True)
class Sources:
    """What one look's sources said, asked now or kept."""

    asked: dict[str, SourceResponse | None]
    # the answers of the available services, asked or kept
    available: dict[str, SourceResponse]
    # the orders they list in canonical order, but those given older than their client echoed
    listed: list[tuple[str, SourceOrder]]
    # known orders their available source does not list yet, within the created grace
    not_listed_yet: set[OrderKey]
    # known orders an answer gives older than their client echoed
    behind: set[OrderKey]
    # the services whose just-asked answer is current (not lagging)
    current: set[str]


class SourceCalls:
    def __init__(
        self,
        sources: Mapping[str, OrderSource],
        metrics: BffMetrics,
        listings: Listings,
        *,
        created_grace_ms: int,
    ) -> None:
        self.sources = sources
        self.metrics = metrics
        self.listings = listings
        self.created_grace_ms = created_grace_ms
        # the source calls in flight per (service, user, list tag read)
        self._asking: Coalesced[tuple[str, str, str], SourceResponse | None] = Coalesced()

    async def ask(
        self,
        poll: Poll,
        versions: Mapping[str, str],
        echoed: Mapping[OrderKey, int],
        read: TagsRead | None,
        kept: Mapping[str, SourceResponse],
        *,
        listed_services: Sequence[str],
    ) -> Sources:
        """Ask: every queried source a kept answer does not stand for, told the list tag read
        before the call; which answers are current, which known orders their sources do not
        list yet or give older than echoed; the current answers kept for later polls."""
        # the list tag read before each source is asked: it serves data at least that new
        list_tags = (
            {service: entry.tag for service, entry in read.lists.items()}
            if read is not None
            else {}
        )
        asked, shared = await self._call(
            [service for service in poll.services if service not in kept], poll, versions, list_tags
        )
        answers: dict[str, SourceResponse | None] = {**asked, **kept}
        available = {service: answer for service, answer in answers.items() if answer is not None}
        listed = sorted(
            ((service, order) for service, answer in available.items() for order in answer.orders),
            key=lambda item: canonical_key(item[1].created_at, item[0], item[1].orderid),
        )
        listed_keys = {OrderKey(service, order.orderid) for service, order in listed}
        not_listed_yet = lagging_orders(
            poll,
            read,
            available,
            listed_keys,
            now_ms=int(time.time() * 1000),
            grace_ms=self.created_grace_ms,
        )
        # an order its answer gives older than the client echoed: the source lags, the order
        # is stale (its echo), and the answer (a kept one, or a fresh one still older) is used
        # for this poll alone
        older = behind(available, echoed)
        listed = [
            (service, order)
            for service, order in listed
            if OrderKey(service, order.orderid) not in older
        ]
        current = current_answers(asked, list_tags, not_listed_yet) - {key.service for key in older}
        self.listings.keep(
            poll.user_id,
            read,
            answers_to_keep(
                asked,
                current=current,
                with_list_tags=listed_services,
                shared=shared,
            ),
        )
        return Sources(asked, available, listed, not_listed_yet, older, current)

    async def _call(
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

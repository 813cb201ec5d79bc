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
from services.bff.last_answers import LastAnswer, LastAnswers
from services.bff.listings import Listings, current_answers, lagging_orders
from services.bff.metrics import BffMetrics
from services.bff.monotonic_reads import behind
from services.bff.poll import Poll
from services.bff.ports import OrderSource
from services.bff.tag_cache import TagsRead
from shared.protocol.look import answers_to_keep
from shared.protocol.ordering import canonical_key
from shared.protocol.source_budget import SourceCallBudget, last_answer_stands
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
    # when the oldest answer that stood in for a call over the budget was given (unix ms)
    stood_in_since_ms: int | None = None


class SourceCalls:
    def __init__(
        self,
        sources: Mapping[str, OrderSource],
        metrics: BffMetrics,
        listings: Listings,
        *,
        created_grace_ms: int,
        list_max_age_ms: int,
        calls_per_window: int = 0,
        last_answers_max_entries: int = 0,
    ) -> None:
        self.sources = sources
        self.metrics = metrics
        self.listings = listings
        self.created_grace_ms = created_grace_ms
        self.list_max_age_ms = list_max_age_ms
        # the order-source budget: calls per source in the last 5 s (docs/protocol.md: A fleet)
        self.budgets = {service: SourceCallBudget(calls_per_window) for service in sorted(sources)}
        self.last_answers = LastAnswers(last_answers_max_entries if calls_per_window else 0)
        # the source calls in flight per (service, user, list tag read)
        self._asking: Coalesced[tuple[str, str, str], Called] = Coalesced()

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
        self._remember_kept(poll.user_id, read, kept)
        asked, shared, stood_in = await self._call(
            [service for service in poll.services if service not in kept], poll, versions, list_tags
        )
        # an answer that stood in for a call over the budget is shown, never kept
        answers: dict[str, SourceResponse | None] = {
            **asked,
            **{service: last.answer for service, last in stood_in.items()},
            **kept,
        }
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
        stood_in_since_ms = min((last.at_ms for last in stood_in.values()), default=None)
        return Sources(asked, available, listed, not_listed_yet, older, current, stood_in_since_ms)

    def _remember_kept(
        self, user_id: str, read: TagsRead | None, kept: Mapping[str, SourceResponse]
    ) -> None:
        """A kept answer that stands for its source is the user's last answer of it too (as
        old as when it was kept): a flush that loses it leaves it here."""
        if not self.last_answers.max_entries or read is None:
            return
        for service, answer in kept.items():
            entry = read.lists.get(service)
            if entry is not None and entry.kept is not None:
                self.last_answers.remember(user_id, service, answer, entry.kept.at_ms)

    async def _call(
        self,
        services: Sequence[str],
        poll: Poll,
        versions: Mapping[str, str],
        list_tags: Mapping[str, str],
    ) -> tuple[dict[str, SourceResponse | None], set[str], dict[str, LastAnswer]]:
        """Each served service's source, told the list tag read before the call (`list_tags`);
        a service the server does not serve is unavailable for this request (None), like a
        source that failed. Also the services whose answer this poll shared with another's
        call (that poll keeps it), and the last answers that stood in for calls over the
        budget (not asked, not in the first)."""
        served = [service for service in services if service in self.sources]
        told = known_by_source(poll.known_orders, served, versions, int(time.time() * 1000))
        caller = poll.caller

        async def call(service: str, list_tag: str | None) -> Called:
            if not self.budgets[service].take(time.monotonic()):
                return self._stand_in(caller.user_id, service)
            answer = await self.sources[service].list_active(caller, told[service], list_tag)
            if answer is not None:
                self.last_answers.remember(caller.user_id, service, answer, int(time.time() * 1000))
            return Called(answer)

        async def ask(service: str) -> tuple[Called, bool]:
            list_tag = list_tags.get(service)
            if list_tag is None:
                return await call(service, None), False
            # however many polls of the user find its kept answer missing or expired at
            # once (devices, tabs, the polls a bump wakes), the source is asked once: those
            # that read the same list tag share the answer
            return await self._asking.run(
                (service, caller.user_id, list_tag), lambda: call(service, list_tag)
            )

        results = await asyncio.gather(*(ask(service) for service in served))
        answers: dict[str, SourceResponse | None] = dict.fromkeys(services)
        shared: set[str] = set()
        stood_in: dict[str, LastAnswer] = {}
        for service, (called, joined) in zip(served, results, strict=True):
            if called.over_budget:
                outcome = "over_budget_last" if called.stood_in else "over_budget_unavailable"
                self.metrics.source_call(service, outcome).inc()
                if called.stood_in is not None:
                    stood_in[service] = called.stood_in
                continue
            outcome = "ok" if called.answer else "unavailable"
            self.metrics.source_call(service, f"coalesced_{outcome}" if joined else outcome).inc()
            answers[service] = called.answer
            if joined:
                shared.add(service)
        return answers, shared, stood_in

    def _stand_in(self, user_id: str, service: str) -> Called:
        """A call over the budget: the user's last answer of that source while it is younger
        than list_max_age, or none (the source is unavailable for this poll)."""
        last = self.last_answers.get(user_id, service)
        stands = last is not None and last_answer_stands(
            last.at_ms, now_ms=int(time.time() * 1000), max_age_ms=self.list_max_age_ms
        )
        return Called(None, over_budget=True, stood_in=last if stands else None)


@dataclass(frozen=True)
class Called:
    """A source call's outcome: its answer (None: failed), or over the budget, not made, and
    the last answer that stands in (if any)."""

    answer: SourceResponse | None
    over_budget: bool = False
    stood_in: LastAnswer | None = None

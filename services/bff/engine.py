"""The orders state engine: the I/O of one poll around the protocol's pure decisions.

One poll: every queried order source in parallel (each with its deadline), then one
order_tags read for all the actual orders (one Redis round trip), then the decisions.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from services.bff.known_orders import ParsedKnownOrder
from services.bff.listings import Listings
from services.bff.metrics import BffMetrics
from services.bff.monotonic_reads import VersionChecks, behind, echoed_versions
from services.bff.observer import UNOBSERVED, LookObserver
from services.bff.poll import Poll
from services.bff.ports import OrderSource
from services.bff.source_calls import SourceCalls, Sources
from services.bff.stale_orders import placed_by, stale_order
from services.bff.stored_tags import stored_tags
from services.bff.tag_cache import TagCache, TagsRead
from shared.answer import (
    ActualOrder,
    AnsweredOrder,
    without_answer_fields,
)
from shared.policy import PollingPolicy
from shared.protocol.allowed_changes import (
    AllowedChange,
    SourceAllowance,
    allowed_changes,
)
from shared.protocol.interval import polling_interval_ms
from shared.protocol.look import (
    EngineConfig,
    look_degraded,
    source_lagging,
    stays_stale,
    tags_made_for,
)
from shared.protocol.need_request import CacheState, decide_parts
from shared.protocol.ordering import (
    merge_orders,
)
from shared.protocol.policy_versions import versions_of_client, versions_to_hold
from shared.protocol.tags import refetch_phase
from shared.upstream_wire import SourceOrder, SourceResponse
from shared.wire import ForcedOrder, ListKey, OrderKey


def oldest(*at_ms: int | None) -> int | None:
    """The earliest of these moments (unix ms), none where none is known."""
    return min((at for at in at_ms if at is not None), default=None)


@dataclass(frozen=True)
class LookResult:
    orders: list[AnsweredOrder]
    allowed_changes: list[AllowedChange]
    interval_ms: int
    # the tag cache or a queried source was unavailable: a poll answered so never waits
    degraded: bool = False
    # the earliest moment (unix ms) a part the min TTL holds back becomes needed
    due_at_ms: int | None = None
    # when the oldest kept answer it used was kept, or the oldest last answer that stood in
    # for a source over its budget was given (unix ms)
    kept_since_ms: int | None = None
    # the policy version each queried service served tells the client to hold
    policy_versions: dict[str, str] = field(default_factory=dict)
    # the client holds another version of some service than it is told: it launches again
    policy_changed: bool = False
    # a known order its source does not list yet is kept stale (the created grace): the
    # source lags, so a waiting poll answers at once instead of waiting
    source_lagging: bool = False

    @property
    def cannot_wait(self) -> bool:
        """A waiting poll answers this look at once: the tag cache or a source is unavailable
        or lagging, so no wake-up can be trusted to come."""
        return self.degraded or self.source_lagging


class OrdersStateEngine:
    def __init__(
        self,
        policy: PollingPolicy,
        sources: Mapping[str, OrderSource],
        tag_cache: TagCache,
        config: EngineConfig,
        metrics: BffMetrics,
        *,
        overload: Callable[[], float] = lambda: 1.0,
        rng: random.Random | None = None,
        observer: LookObserver = UNOBSERVED,
    ) -> None:
        self.policy = policy
        self.sources = sources
        self.tag_cache = tag_cache
        self.config = config
        self.metrics = metrics
        # how overloaded the process is now (the interval's factor); admission control's
        self.overload = overload
        self.rng = rng or random.Random()
        self.observer = observer
        self.listings = Listings(
            tag_cache, metrics, max_age_ms=config.list_max_age_ms, rng=self.rng
        )
        self.source_calls = SourceCalls(
            sources,
            metrics,
            self.listings,
            created_grace_ms=config.created_grace_ms,
            list_max_age_ms=config.list_max_age_ms,
            calls_per_window=config.source_calls_per_window,
            last_answers_max_entries=config.last_answers_max_entries,
        )
        self.version_checks = VersionChecks(config.timings.min_ttl_ms)

    def _capabilities(self, service: str) -> tuple[str, ...]:
        served = self.policy.services.get(service)
        return served.change_capabilities if served is not None else ()

    def policy_rules(self, versions: Mapping[str, str]) -> list[msgspec.Raw]:
        """The rules of these versions (service → version, each one launch hands out), as
        launch gives them."""
        rules = self.policy.launch_rules
        return [rule for service, version in versions.items() for rule in rules[service, version]]

    def listed_services(self, poll: Poll) -> list[str]:
        """The poll's queried services whose sources bump list tags: their answers are kept,
        their list channels wake waiting polls."""
        if not self.config.list_tags:
            return []
        return [
            service
            for service in poll.services
            if service in self.sources and self.policy.services[service].list_tags
        ]

    def _actual(
        self,
        service: str,
        source_order: SourceOrder,
        known_order: ParsedKnownOrder | None,
        stored_parts: dict[str, str] | None,
        *,
        version: str,
        cache: CacheState,
        now_ms: int,
        force_honoured: bool,
        tags_made_ms: int | None,
    ) -> tuple[ActualOrder, int | None]:
        """An order of an available source, decided by the policy version the client is
        answered by, and when a part the min TTL holds back becomes needed. Each part of any
        version reads its own content tag (ServicePolicy.tagged_parts)."""
        self.metrics.poll_orders.labels(service, version).inc()
        decision = decide_parts(
            self.policy.services[service].versions[version],
            version,
            known_order.order.tags if known_order else {},
            stored_parts,
            force=self._force(
                known_order, honoured=force_honoured, cache_available=cache.available
            ),
            cache=cache,
            now_ms=now_ms,
            timings=self.config.timings,
            refetch_phase=refetch_phase(service, source_order.orderid),
            tags_made_ms=tags_made_ms,
        )
        for part in decision.need_request:
            self.metrics.need_request.labels(service, part).inc()
        order = ActualOrder(
            orderid=source_order.orderid,
            service=service,
            status=source_order.status,
            tags=decision.valid_tags,
            need_request=decision.need_request,
            change_capabilities=source_order.change_capabilities,
            created_at=source_order.created_at,
            version=source_order.version,
            brief=without_answer_fields(source_order.brief),
        )
        return order, decision.due_at_ms

    def _force(
        self, known_order: ParsedKnownOrder | None, *, honoured: bool, cache_available: bool
    ) -> bool:
        """Whether the client's force on the order counts: order_tags counted it against the
        order's budget in the poll's tag read, for every replica together. While the cache
        is down force is ignored anyway (rule 3)."""
        if known_order is None or not known_order.order.force or not cache_available:
            return False
        self.metrics.force.labels("honoured" if honoured else "over_budget").inc()
        return honoured

    async def look(self, poll: Poll, *, handing_out: bool = False) -> LookResult:
        """One look: every queried source, then the tags of the orders they list. The orders
        are decided by the policy version the client holds, or with `handing_out` (launch)
        by the version it is handed."""
        started = self.observer.look_started(poll)
        with self.metrics.poll_look.time():
            client_versions = versions_of_client(
                self.policy,
                poll.services,
                poll.stated_versions,
                (
                    (known_order.order.service, known_order.order.tags)
                    for known_order in poll.known_orders
                ),
            )
            to_hold = versions_to_hold(self.policy, client_versions)
            result = await self._look(
                poll, to_hold if handing_out else client_versions, to_hold, client_versions
            )
        self.observer.looked(poll, result, started)
        return result

    async def _look(
        self,
        poll: Poll,
        versions: dict[str, str],
        to_hold: dict[str, str],
        client_versions: dict[str, str],
    ) -> LookResult:
        # the versions the client echoed: no order is answered older (monotonic reads)
        echoed = echoed_versions(poll.known_orders)
        read, kept = await self._read(poll, echoed)
        sources = await self.source_calls.ask(
            poll, versions, echoed, read, kept, listed_services=self.listed_services(poll)
        )
        actual, due_at_ms, tag_store_up = await self._decide(poll, versions, read, sources)
        orders = self._merge(poll, sources, actual)
        degraded = look_degraded(
            tag_store_up=tag_store_up,
            queried=poll.services,
            served=self.sources,
            available=sources.available,
            known_services=(known_order.order.service for known_order in poll.known_orders),
        )
        allowances: dict[str, SourceAllowance] = {
            service: answer.allowed_changes for service, answer in sources.available.items()
        }
        return LookResult(
            orders,
            allowed_changes(poll.services, allowances),
            self.interval_ms(orders, degraded=degraded),
            degraded=degraded,
            due_at_ms=due_at_ms,
            kept_since_ms=oldest(
                self.listings.kept_since_ms(read, kept), sources.stood_in_since_ms
            ),
            policy_versions=to_hold,
            policy_changed=to_hold != client_versions,
            source_lagging=source_lagging(
                not_listed_yet=sources.not_listed_yet,
                behind=sources.behind,
                answered=(service for service, answer in sources.asked.items() if answer),
                current=sources.current,
            ),
        )

    async def _read(
        self, poll: Poll, echoed: Mapping[OrderKey, int]
    ) -> tuple[TagsRead | None, dict[str, SourceResponse]]:
        """Read: one order_tags call for the known orders' tags and the lists' tags and kept
        answers, and the kept answers that stand for asking their source."""
        # the checked user id (services.bff.requests): a kept answer is read for it alone
        user_id = poll.user_id
        listed_services = self.listed_services(poll)
        read = await self.tag_cache.read(
            [
                known_order.key
                for known_order in poll.known_orders
                if known_order.order.service in self.sources
            ],
            [ListKey(service, user_id) for service in listed_services],
            # counted against the order's budget of this user: naming another's order with
            # force spends nothing of its owner's
            force=[
                ForcedOrder(known_order.order.service, known_order.order.orderid, user_id)
                for known_order in poll.forced
                if known_order.order.service in self.sources
            ],
            force_per_minute=self.config.force_per_order_per_minute,
        )
        kept = self.listings.kept(read, listed_services, int(time.time() * 1000))
        # monotonic reads: a kept answer older than a version the client echoed is not used,
        # its source is asked (at most once per min_ttl per user and service)
        older = {key.service for key in behind(kept, echoed)}
        for service in self.version_checks.allow(user_id, older, int(time.time() * 1000)):
            self.metrics.source_call(service, "kept_older").inc()
            del kept[service]
        return read, kept

    async def _decide(
        self, poll: Poll, versions: dict[str, str], read: TagsRead | None, sources: Sources
    ) -> tuple[list[AnsweredOrder], int | None, bool]:
        """Decide: the listed orders' stored tags (the missing ones made for the orders of
        current answers), then each order's parts by the client's tags and the stored ones.
        The orders, when a part the min TTL holds back becomes needed, and whether the tag
        store was up."""
        keys = [OrderKey(service, order.orderid) for service, order in sources.listed]
        order_versions = {
            key: order.version
            for (_, order), key in zip(sources.listed, keys, strict=True)
            if order.version is not None
        }
        looked = await stored_tags(
            self.tag_cache,
            self.policy,
            keys,
            read,
            tags_made_for(keys, sources.current),
            poll.user_id,
            order_versions,
        )
        stored, made_ms = looked if looked is not None else (None, {})
        cache = self.tag_cache.state(stored)
        now_ms = int(time.time() * 1000)
        known_orders_by_key = {known_order.key: known_order for known_order in poll.known_orders}
        decided = [
            self._actual(
                service,
                source_order,
                known_orders_by_key.get(key),
                stored.get(key) if stored else None,
                version=versions[service],
                cache=cache,
                now_ms=now_ms,
                force_honoured=read is not None and key in read.force_honoured,
                tags_made_ms=made_ms.get(key),
            )
            for (service, source_order), key in zip(sources.listed, keys, strict=True)
        ]
        due_at_ms = min((due for _, due in decided if due is not None), default=None)
        return [order for order, _ in decided], due_at_ms, cache.available

    def _merge(
        self, poll: Poll, sources: Sources, actual: list[AnsweredOrder]
    ) -> list[AnsweredOrder]:
        """Merge: the actual orders with the known orders that stay stale, in canonical
        order (docs/protocol.md: Orders and their order)."""
        stale: list[AnsweredOrder] = [
            stale_order(known_order, self._capabilities(known_order.order.service))
            for known_order in poll.known_orders
            if stays_stale(
                known_order.key,
                available=sources.available,
                not_listed_yet=sources.not_listed_yet,
                behind=sources.behind,
            )
        ]
        for order in stale:
            # a name the client made up is no label: metrics stay bounded
            served = order.service in self.sources
            self.metrics.stale_orders.labels(order.service if served else "unknown").inc()
        return merge_orders(
            actual,
            stale,
            [known_order.key for known_order in poll.known_orders],
            key=lambda order: order.key,
            placed_by=placed_by,
        )

    def interval_ms(self, orders: Sequence[AnsweredOrder], *, degraded: bool) -> int:
        """An answer's interval drawn now: a look's, or one held from a kept look's."""
        interval_ms = polling_interval_ms(
            [(order.service, order.status) for order in orders],
            degraded=degraded,
            overload=self.overload(),
            rng=self.rng,
            rules=self.config.interval,
        )
        self.metrics.interval.observe(interval_ms)
        return interval_ms

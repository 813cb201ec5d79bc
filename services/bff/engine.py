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
from services.bff.listings import Listings, current_answers, lagging_orders
from services.bff.metrics import BffMetrics
from services.bff.monotonic_reads import VersionChecks, behind, echoed_versions
from services.bff.observer import UNOBSERVED, LookObserver
from services.bff.poll import Poll
from services.bff.ports import OrderSource
from services.bff.source_calls import SourceCalls
from services.bff.stale_orders import placed_by, stale_order
from services.bff.stored_tags import stored_tags
from services.bff.tag_cache import TagCache
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
from shared.protocol.interval import IntervalRules, polling_interval_ms
from shared.protocol.need_request import CacheState, TagTimings, decide_parts
from shared.protocol.ordering import (
    canonical_key,
    merge_orders,
)
from shared.protocol.policy_versions import versions_of_client, versions_to_hold
from shared.protocol.tags import refetch_phase
from shared.upstream_wire import SourceOrder, SourceResponse
from shared.wire import ForcedOrder, ListKey, OrderKey


@dataclass(frozen=True)
class LookResult:
    orders: list[AnsweredOrder]
    allowed_changes: list[AllowedChange]
    interval_ms: int
    # the tag cache or a queried source was unavailable: a poll answered so never waits
    degraded: bool = False
    # the earliest moment (unix ms) a part the min TTL holds back becomes needed
    due_at_ms: int | None = None
    kept_since_ms: int | None = None  # when the oldest kept answer it used was kept (unix ms)
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


@dataclass(frozen=True)
class EngineConfig:
    timings: TagTimings
    interval: IntervalRules
    force_per_order_per_minute: int
    # sources whose policy says list_tags are answered from kept answers (off: always asked)
    list_tags: bool
    # a kept source answer stands for the source this long at most
    list_max_age_ms: int
    # a known order its source does not list stays (stale) this long after its tags were made
    created_grace_ms: int


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
        self.source_calls = SourceCalls(sources, metrics)
        self.listings = Listings(
            tag_cache, metrics, max_age_ms=config.list_max_age_ms, rng=self.rng
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
        return [s for s in poll.services if s in self.sources and self.policy.services[s].list_tags]

    def _actual(
        self,
        service: str,
        source_order: SourceOrder,
        client: ParsedKnownOrder | None,
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
        client_tags = client.order.tags if client else {}
        self.metrics.poll_orders.labels(service, version).inc()
        decision = decide_parts(
            self.policy.services[service].versions[version],
            version,
            client_tags,
            stored_parts,
            force=self._force(client, honoured=force_honoured, cache_available=cache.available),
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
        self, client: ParsedKnownOrder | None, *, honoured: bool, cache_available: bool
    ) -> bool:
        """Whether the client's force on the order counts: order_tags counted it against the
        order's budget in the poll's tag read, for every replica together. While the cache
        is down force is ignored anyway (rule 3)."""
        if client is None or not client.order.force or not cache_available:
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
                ((k.order.service, k.order.tags) for k in poll.known),
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
        known, services = poll.known, poll.services
        # the checked user id (services.bff.requests): a kept answer is read for it alone
        user_id = poll.user_id
        listed_services = self.listed_services(poll)
        # one order_tags call: the known orders' tags, and the lists' tags and kept answers
        read = await self.tag_cache.read(
            [k.key for k in known if k.order.service in self.sources],
            [ListKey(service, user_id) for service in listed_services],
            # counted against the order's budget of this user: naming another's order with
            # force spends nothing of its owner's
            force=[
                ForcedOrder(k.order.service, k.order.orderid, user_id)
                for k in poll.forced
                if k.order.service in self.sources
            ],
            force_per_minute=self.config.force_per_order_per_minute,
        )
        kept = self.listings.kept(read, listed_services, int(time.time() * 1000))
        # monotonic reads: a kept answer older than a version the client echoed is not used,
        # its source is asked (at most once per min_ttl per user and service)
        echoed = echoed_versions(known)
        older = {key.service for key in behind(kept, echoed)}
        for service in self.version_checks.allow(user_id, older, int(time.time() * 1000)):
            self.metrics.source_call(service, "kept_older").inc()
            del kept[service]
        # the list tag read before each source is asked: it serves data at least that new
        list_tags = {s: e.tag for s, e in read.lists.items()} if read is not None else {}
        asked, shared = await self.source_calls.ask(
            [s for s in services if s not in kept], poll, versions, list_tags
        )
        sources: dict[str, SourceResponse | None] = {**asked, **kept}
        available = {service: result for service, result in sources.items() if result is not None}

        listed = sorted(
            ((service, order) for service, result in available.items() for order in result.orders),
            key=lambda item: canonical_key(item[1].created_at, item[0], item[1].orderid),
        )
        listed_keys = {OrderKey(service, order.orderid) for service, order in listed}
        now_ms = int(time.time() * 1000)
        lagging = lagging_orders(
            poll, read, available, listed_keys, now_ms=now_ms, grace_ms=self.config.created_grace_ms
        )
        # an order its answer gives older than the client echoed: the source lags, the order
        # is stale (its echo), and the answer (a kept one, or a fresh one still older) is used
        # for this poll alone
        backwards = behind(available, echoed)
        listed = [(s, o) for s, o in listed if OrderKey(s, o.orderid) not in backwards]
        keys = [OrderKey(service, order.orderid) for service, order in listed]
        current = current_answers(asked, list_tags, lagging) - {k.service for k in backwards}
        # a lagging answer is used for this poll alone: kept, it would stand for the source
        # under a tag whose data it does not show, longer than the created grace; by the poll
        # that made the call alone: those that shared it would write it again
        self.listings.keep(
            user_id,
            read,
            {
                s: a
                for s, a in asked.items()
                if s in current and s in listed_services and s not in shared
            },
        )
        # only a just-asked current answer's orders get missing tags: a kept answer may list an
        # order that has finished since (its tags deleted, its list bump not read yet), and
        # tags made for it again would also open its created grace, showing it for 10 s more
        creatable = {key for key in keys if key.service in current}
        order_versions = {
            key: order.version
            for (_, order), key in zip(listed, keys, strict=True)
            if order.version is not None
        }
        looked = await stored_tags(
            self.tag_cache, self.policy, keys, read, creatable, user_id, order_versions
        )
        stored, made_ms = looked if looked is not None else (None, {})
        cache = self.tag_cache.state(stored)
        now_ms = int(time.time() * 1000)
        known_by_key = {k.key: k for k in known}

        decided = [
            self._actual(
                service,
                source_order,
                known_by_key.get(key),
                stored.get(key) if stored else None,
                version=versions[service],
                cache=cache,
                now_ms=now_ms,
                force_honoured=read is not None and key in read.force_honoured,
                tags_made_ms=made_ms.get(key),
            )
            for (service, source_order), key in zip(listed, keys, strict=True)
        ]
        actual: list[AnsweredOrder] = [order for order, _ in decided]
        due_at_ms = min((due for _, due in decided if due is not None), default=None)

        # a known order of an unavailable service stays, as the client knew it; so does one
        # its source does not list yet, for a grace after its tags were made
        stale: list[AnsweredOrder] = [
            stale_order(k, self._capabilities(k.order.service))
            for k in known
            if k.order.service not in available or k.key in lagging or k.key in backwards
        ]
        for order in stale:
            # a name the client made up is no label: metrics stay bounded
            served = order.service in self.sources
            self.metrics.stale_orders.labels(order.service if served else "unknown").inc()
        orders: list[AnsweredOrder] = merge_orders(
            actual, stale, [k.key for k in known], key=lambda o: o.key, placed_by=placed_by
        )

        allowances: dict[str, SourceAllowance] = {
            service: result.allowed_changes for service, result in available.items()
        }
        # a failed source, or a known order of a service not served (its stale answer must
        # not make a waiting client poll again at once); a service merely listed as supported
        # that the server does not serve has no source to protect: not degraded
        degraded = (
            not cache.available
            or any(s in self.sources and s not in available for s in services)
            or any(k.order.service not in self.sources for k in known)
        )
        return LookResult(
            orders,
            allowed_changes(services, allowances),
            self.interval_ms(orders, degraded=degraded),
            degraded=degraded,
            due_at_ms=due_at_ms,
            kept_since_ms=self.listings.kept_since_ms(read, kept),
            policy_versions=to_hold,
            policy_changed=to_hold != client_versions,
            # a just-created order not listed yet, or an answer of older data than the list
            # tag read: the bump that would wake a waiting poll has rung already; an order
            # older than its echo: no bump is coming for it (versions are not in list tags)
            source_lagging=bool(lagging or backwards)
            or any(s not in current for s in asked if asked[s]),
        )

    def interval_ms(self, orders: Sequence[AnsweredOrder], *, degraded: bool) -> int:
        """An answer's interval drawn now: a look's, or one held from a kept look's."""
        interval_ms = polling_interval_ms(
            [(o.service, o.status) for o in orders],
            degraded=degraded,
            overload=self.overload(),
            rng=self.rng,
            rules=self.config.interval,
        )
        self.metrics.interval.observe(interval_ms)
        return interval_ms

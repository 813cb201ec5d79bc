"""The resources both client-facing services open, one concern each, every one beside the
`AppKey` it is shared under. `setup_bff` lists them in the order they need each other:

    policy, metrics, limits  at app creation (a bad policy stops start-up)
    HTTP session             shared.http
    tag cache                order_tags behind its circuit     needs: HTTP session
    order sources            one client per service            needs: HTTP session
    admission                the cap of polls in progress
    engine                   one look at sources and tags      needs: tag cache, sources,
                                                                      admission
    parts                    part endpoints, extended launch   needs: tag cache, sources;
                             with a Redis, the shared part cache on it

A resource set up before one it needs fails start-up with a message naming both
(`shared.web.needs`), not with a KeyError on the first request. The core's objects are built
from the settings here (`engine_config`, `limits`, ...), one function each: the simulation,
the tests and the benchmarks build theirs with the same functions."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Mapping

from aiohttp import web

from services.bff.admission import Admission
from services.bff.config import LEGACY_PART_TYPE, BffSettings, ProtocolSettings
from services.bff.engine import OrdersStateEngine
from services.bff.fetch_memo import FetchMemo
from services.bff.metrics import BffMetrics
from services.bff.part_cache import PART_CACHE_CLIENT_NAME, RedisPartCache
from services.bff.part_service import PartService
from services.bff.ports import OrderSource, TagStore
from services.bff.tag_cache import TagCache
from services.bff.tag_reads import JoinedTagReads
from services.bff.upstreams import OrderSourceClient, PartUpstreamClient
from shared.config import RedisSettings
from shared.http import HTTP_SESSION, Protection, http_session_ctx
from shared.order_tags_client import OrderTagsClient
from shared.policy import PollingPolicy, load_policy
from shared.protocol.admission import BudgetLimit
from shared.protocol.circuit import CircuitBreaker
from shared.protocol.interval import IntervalRules
from shared.protocol.limits import Limits
from shared.protocol.look import EngineConfig
from shared.protocol.need_request import TagTimings
from shared.protocol.retry_budget import RetryBudget
from shared.redis import create_redis
from shared.web import METRICS, CleanupContext, needs

# -- the core's objects, from the settings


def timings(protocol: ProtocolSettings) -> TagTimings:
    return TagTimings(
        min_ttl_ms=int(protocol.min_ttl_s * 1000),
        degraded_min_ttl_ms=int(protocol.degraded_min_ttl_s * 1000),
    )


def interval_rules(
    protocol: ProtocolSettings, policy: PollingPolicy | None = None
) -> IntervalRules:
    """The per-status bases are policy (the policy file; none without one); the rest are the
    settings'."""
    return IntervalRules(
        status_bases_ms=policy.interval_bases_ms() if policy is not None else {},
        default_base_ms=protocol.interval.default_ms,
        no_orders_ms=protocol.interval.no_orders_ms,
        jitter=protocol.interval.jitter,
        min_ms=protocol.interval.min_ms,
        max_ms=protocol.interval.max_ms,
    )


def engine_config(protocol: ProtocolSettings, policy: PollingPolicy) -> EngineConfig:
    """The poll engine's config (the services and the simulation build their engines with
    it)."""
    return EngineConfig(
        timings=timings(protocol),
        interval=interval_rules(protocol, policy),
        force_per_order_per_minute=protocol.force_per_order_per_minute,
        list_tags=protocol.list_tags,
        list_max_age_ms=int(protocol.list_max_age_s * 1000),
        created_grace_ms=int(protocol.created_grace_s * 1000),
        source_calls_per_window=protocol.source_calls_per_window,
        last_answers_max_entries=protocol.last_answers_max_entries,
    )


def limits(protocol: ProtocolSettings) -> Limits:
    """What a poll's known_orders may hold."""
    return Limits(
        max_known_orders=protocol.max_known_orders,
        max_extra_fields=protocol.max_extra_fields,
        max_extra_bytes=protocol.max_extra_bytes,
    )


def protection(protocol: ProtocolSettings, on_event: Callable[[str], None]) -> Protection:
    """A breaker and a retry budget for one upstream."""
    return Protection(
        CircuitBreaker(protocol.upstream_circuit_failures, protocol.upstream_circuit_open_s),
        RetryBudget(protocol.retry_budget_ratio, protocol.retry_budget_min),
        on_event,
    )


def tag_cache_breaker(protocol: ProtocolSettings) -> CircuitBreaker:
    return CircuitBreaker(protocol.circuit_failures, protocol.circuit_open_s)


def degraded_memo(protocol: ProtocolSettings) -> FetchMemo:
    return FetchMemo(
        ttl_ms=timings(protocol).degraded_min_ttl_ms,
        max_bytes=protocol.part_fetches.degraded_memo_bytes,
    )


def recent_memo(protocol: ProtocolSettings) -> FetchMemo:
    return FetchMemo(
        ttl_ms=timings(protocol).min_ttl_ms, max_bytes=protocol.part_fetches.recent_memo_bytes
    )


def part_cache_ttl_ms(protocol: ProtocolSettings) -> int:
    return int(protocol.part_cache.ttl_s * 1000)


def budget_limit(protocol: ProtocolSettings) -> BudgetLimit:
    """The admission cap's bounds and what moves it."""
    return BudgetLimit(
        min_limit=protocol.admission.min_polls_in_flight,
        max_limit=protocol.max_polls_in_flight,
        budget_ms=protocol.admission.budget_ms,
        look_cost_ms=protocol.admission.look_cost_ms,
        lag_target_ms=protocol.admission.lag_target_ms,
    )


# -- the resources

POLICY = web.AppKey("policy", PollingPolicy)
BFF_METRICS = web.AppKey("bff_metrics", BffMetrics)
LIMITS = web.AppKey("limits", Limits)


def load_bff_policy(settings: BffSettings) -> PollingPolicy:
    return load_policy(settings.protocol.policy_path)


def part_upstream_urls(settings: BffSettings, policy: PollingPolicy) -> dict[str, str]:
    """Every upstream the policy's parts name, by its own or their part type's name (and
    totw, for the legacy endpoint) → its URL."""
    names = {endpoint.rule.upstream_name for endpoint in policy.endpoints} | {LEGACY_PART_TYPE}
    return {name: settings.upstreams.part_upstream_url(name) for name in sorted(names)}


TAG_CACHE = web.AppKey("tag_cache", TagCache)


def tag_cache_ctx(settings: BffSettings) -> CleanupContext:
    protocol = settings.protocol

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        tags_client = OrderTagsClient(
            settings.order_tags_url,
            settings.service_token.get_secret_value(),
            deadline_s=protocol.tags_deadline_s,
            session=needs(app, HTTP_SESSION, "the tag cache"),
            own_queue_allowance_s=protocol.admission.budget_ms / 1000,
        )
        store: TagStore = tags_client
        joined = None
        if protocol.tag_reads.join:
            store = joined = JoinedTagReads(
                tags_client,
                max_in_flight=protocol.tag_reads.in_flight,
                gather_s=protocol.tag_reads.gather_ms / 1000,
            )
        app[TAG_CACHE] = TagCache(store, tag_cache_breaker(protocol), app[BFF_METRICS])
        yield
        if joined is not None:
            await joined.close()
        await tags_client.close()

    return ctx


SOURCES = web.AppKey("sources", Mapping[str, OrderSource])


def sources_ctx(settings: BffSettings) -> CleanupContext:
    protocol = settings.protocol

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        session = needs(app, HTTP_SESSION, "the order sources")
        clients = {
            service: OrderSourceClient(
                service,
                settings.upstreams.order_source_url(service),
                deadline_s=protocol.source_deadline_s,
                session=session,
                protection=protection(
                    protocol, app[BFF_METRICS].upstream_event(f"source:{service}")
                ),
                own_queue_allowance_s=protocol.admission.budget_ms / 1000,
            )
            for service in app[POLICY].services
        }
        app[SOURCES] = clients
        yield
        await asyncio.gather(*(client.close() for client in clients.values()))

    return ctx


ADMISSION = web.AppKey("admission", Admission)


def admission_ctx(settings: BffSettings) -> CleanupContext:
    """Admission control and the task that follows the event loop's lag to move its cap."""
    protocol = settings.protocol

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        admission = app[ADMISSION] = Admission(
            budget_limit(protocol),
            overload_in_flight=protocol.admission.overload_in_flight,
            overload_max_factor=protocol.admission.overload_max_factor,
            retry_after_base_s=protocol.admission.overload_retry_after_s,
            metrics=app[BFF_METRICS],
            rng=random.Random(),
        )
        lag_watch = asyncio.create_task(
            admission.watch(protocol.admission.sample_s, protocol.admission.window_s)
        )
        yield
        lag_watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await lag_watch

    return ctx


ENGINE = web.AppKey("engine", OrdersStateEngine)


def engine_ctx(settings: BffSettings) -> CleanupContext:
    protocol = settings.protocol

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        policy = app[POLICY]
        app[ENGINE] = OrdersStateEngine(
            policy,
            needs(app, SOURCES, "the engine"),
            needs(app, TAG_CACHE, "the engine"),
            engine_config(protocol, policy),
            app[BFF_METRICS],
            overload=needs(app, ADMISSION, "the engine").overload,
        )
        yield
        await app[ENGINE].listings.drain()

    return ctx


# the part machinery: orders_state's part endpoints, and launch's extended order info
PARTS = web.AppKey("parts", PartService)
# the legacy endpoint's upstream, passed through as it is
TOTW = web.AppKey("totw", PartUpstreamClient)


def parts_ctx(settings: BffSettings, redis: RedisSettings | None) -> CleanupContext:
    """`redis`: the tags' Redis, where the shared part cache keeps part data for every
    replica (None, or nothing configured: the per-process memos alone)."""
    protocol = settings.protocol
    cache = protocol.part_cache
    shared = redis is not None and bool(redis.url or redis.cluster_nodes) and cache.enabled

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        policy = app[POLICY]
        session = needs(app, HTTP_SESSION, "the part upstreams")
        upstreams = {
            upstream: PartUpstreamClient(
                url,
                timeout_s=protocol.part_timeout_s,
                deadline_s=protocol.part_deadline_s,
                session=session,
                protection=protection(protocol, app[BFF_METRICS].upstream_event(upstream)),
            )
            for upstream, url in part_upstream_urls(settings, policy).items()
        }
        app[TOTW] = upstreams[LEGACY_PART_TYPE]
        shared_parts = None
        if shared and redis is not None:
            shared_parts = RedisPartCache(
                create_redis(redis, client_name=PART_CACHE_CLIENT_NAME, decode_responses=False),
                app[BFF_METRICS],
                ttl_ms=part_cache_ttl_ms(protocol),
                max_entries=cache.max_entries,
                max_entry_bytes=cache.max_entry_bytes,
                zlib_level=cache.zlib_level,
                deadline_s=redis.command_deadline_s,
                breaker=tag_cache_breaker(protocol),
            )
        app[PARTS] = PartService(
            policy,
            needs(app, TAG_CACHE, "the part service"),
            upstreams,
            app[BFF_METRICS],
            needs(app, SOURCES, "the part service"),
            coalesce=protocol.part_fetches.coalesce,
            degraded_memo=degraded_memo(protocol),
            recent_memo=recent_memo(protocol),
            shared_parts=shared_parts,
            shared_ttl_ms=part_cache_ttl_ms(protocol),
        )
        yield
        await asyncio.gather(*(client.close() for client in upstreams.values()))
        if shared_parts is not None:
            await shared_parts.redis.aclose()

    return ctx


def setup_bff(
    app: web.Application, settings: BffSettings, redis: RedisSettings | None = None
) -> None:
    """Load and check the policy now (a bad one stops start-up); open the clients on
    startup, in the order they need each other. `redis`: the tags' Redis, for the shared
    part cache."""
    policy = load_bff_policy(settings)
    app[POLICY] = policy
    app[BFF_METRICS] = BffMetrics(app[METRICS].registry)
    app[LIMITS] = limits(settings.protocol)
    app.cleanup_ctx.extend(
        [
            http_session_ctx,
            tag_cache_ctx(settings),
            sources_ctx(settings),
            admission_ctx(settings),
            engine_ctx(settings),
            parts_ctx(settings, redis),
        ]
    )

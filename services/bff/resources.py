"""The resources both client-facing services open, each in its own `cleanup_ctx`: the HTTP
session, the tag cache (order_tags behind its circuit), the engine with its order sources,
and the part service (orders_state's part endpoints, launch's extended order info), which
shares the same tag cache."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator

from aiohttp import web

from services.bff.admission import Admission
from services.bff.config import LEGACY_PART_TYPE, BffSettings
from services.bff.engine import EngineConfig, OrdersStateEngine
from services.bff.fetch_memo import FetchMemo
from services.bff.keys import BFF_METRICS, ENGINE, LIMITS, PARTS, POLICY, TAG_CACHE, TOTW
from services.bff.known_orders import Limits
from services.bff.metrics import BffMetrics
from services.bff.part_service import PartService
from services.bff.part_upstream import PartUpstreamClient
from services.bff.sources import OrderSourceClient
from services.bff.tag_cache import TagCache
from shared.errors import StartupError
from shared.http import HTTP_SESSION, http_session_ctx
from shared.order_tags_client import OrderTagsClient
from shared.policy import PollingPolicy, load_policy
from shared.protocol.admission import AdaptiveLimit
from shared.protocol.circuit import CircuitBreaker
from shared.web import METRICS


def load_bff_policy(settings: BffSettings) -> PollingPolicy:
    policy = load_policy(settings.protocol.policy_path)
    for service in policy.services:
        if settings.upstreams.order_source_url(service) is None:
            raise StartupError(f"service {service!r} of the policy has no order source URL")
    return policy


def part_upstream_urls(settings: BffSettings, policy: PollingPolicy) -> dict[str, str]:
    """The upstream of every part type the policy uses (and totw, for the legacy endpoint);
    a part type with none stops start-up."""
    part_types = {endpoint.rule.part_type for endpoint in policy.endpoints} | {LEGACY_PART_TYPE}
    urls = {}
    for part_type in sorted(part_types):
        url = settings.upstreams.part_upstream_url(part_type)
        if url is None:
            raise StartupError(f"part_type {part_type!r} has no upstream")
        urls[part_type] = url
    return urls


def setup_bff(app: web.Application, settings: BffSettings) -> None:
    """Load and check the policy now (a bad one stops start-up); open clients on startup."""
    policy = load_bff_policy(settings)
    protocol = settings.protocol
    app[POLICY] = policy
    app[BFF_METRICS] = BffMetrics(app[METRICS].registry)
    app[LIMITS] = Limits(
        max_known_orders=protocol.max_known_orders,
        max_extra_fields=protocol.max_extra_fields,
        max_extra_bytes=protocol.max_extra_bytes,
    )

    async def tag_cache_ctx(app: web.Application) -> AsyncIterator[None]:
        tags_client = OrderTagsClient(
            settings.order_tags_url,
            settings.service_token.get_secret_value(),
            deadline_s=protocol.tags_deadline_s,
            session=app[HTTP_SESSION],
        )
        app[TAG_CACHE] = TagCache(
            tags_client,
            CircuitBreaker(protocol.circuit_failures, protocol.circuit_open_s),
            app[BFF_METRICS],
        )
        yield
        await tags_client.close()

    async def engine_ctx(app: web.Application) -> AsyncIterator[None]:
        sources = {
            service: OrderSourceClient(
                service,
                settings.upstreams.order_source_url(service) or "",
                deadline_s=protocol.source_deadline_s,
                session=app[HTTP_SESSION],
                protection=protocol.protection(
                    app[BFF_METRICS].upstream_event(f"source:{service}")
                ),
            )
            for service in policy.services
        }
        admission = Admission(
            AdaptiveLimit(
                min_limit=protocol.min_polls_in_flight,
                max_limit=protocol.max_polls_in_flight,
                lag_target_ms=protocol.admission_lag_target_ms,
            ),
            overload_in_flight=protocol.overload_in_flight,
            overload_max_factor=protocol.overload_max_factor,
            retry_after_base_s=protocol.overload_retry_after_s,
            metrics=app[BFF_METRICS],
            rng=random.Random(),
        )
        app[ENGINE] = OrdersStateEngine(
            policy,
            sources,
            app[TAG_CACHE],
            EngineConfig(
                timings=protocol.timings(),
                interval=protocol.interval_rules(policy),
                force_per_order_per_minute=protocol.force_per_order_per_minute,
            ),
            app[BFF_METRICS],
            admission,
        )
        lag_watch = asyncio.create_task(admission.watch_loop_lag(protocol.admission_sample_s))
        yield
        lag_watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await lag_watch
        await asyncio.gather(*(source.close() for source in sources.values()))

    urls = part_upstream_urls(settings, policy)

    async def parts_ctx(app: web.Application) -> AsyncIterator[None]:
        upstreams = {
            part_type: PartUpstreamClient(
                url,
                timeout_s=protocol.part_timeout_s,
                deadline_s=protocol.part_deadline_s,
                session=app[HTTP_SESSION],
                protection=protocol.protection(app[BFF_METRICS].upstream_event(part_type)),
            )
            for part_type, url in urls.items()
        }
        app[TOTW] = upstreams[LEGACY_PART_TYPE]
        app[PARTS] = PartService(
            policy,
            app[TAG_CACHE],
            upstreams,
            app[BFF_METRICS],
            app[ENGINE].sources,
            coalesce=protocol.coalesce_part_fetches,
            degraded_memo=FetchMemo(
                ttl_ms=protocol.timings().degraded_min_ttl_ms,
                max_bytes=protocol.degraded_memo_bytes,
            ),
            recent_memo=FetchMemo(
                ttl_ms=protocol.timings().min_ttl_ms,
                max_bytes=protocol.recent_memo_bytes,
            ),
        )
        yield
        await asyncio.gather(*(client.close() for client in upstreams.values()))

    app.cleanup_ctx.extend([http_session_ctx, tag_cache_ctx, engine_ctx, parts_ctx])

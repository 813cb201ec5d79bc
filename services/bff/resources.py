"""The resources both client-facing services open: order source clients, the tag cache and
the engine, in one `cleanup_ctx`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from services.bff.config import BffSettings
from services.bff.engine import EngineConfig, OrdersStateEngine, PollResult
from services.bff.known_orders import Limits, parse_known_orders, queried_services
from services.bff.metrics import BffMetrics
from services.bff.sources import OrderSourceClient
from services.bff.tag_cache import TagCache
from shared.errors import Unauthorized
from shared.http import HTTP_SESSION, http_session_ctx
from shared.order_tags_client import OrderTagsClient
from shared.policy import PolicyError, PollingPolicy, load_policy
from shared.protocol.circuit import CircuitBreaker
from shared.web import METRICS, request_id

ENGINE = web.AppKey("engine", OrdersStateEngine)
POLICY = web.AppKey("policy", PollingPolicy)
BFF_METRICS = web.AppKey("bff_metrics", BffMetrics)
LIMITS = web.AppKey("limits", Limits)
TAG_CACHE = web.AppKey("tag_cache", TagCache)

USER_HEADER = "X-Yandex-UID"


def load_bff_policy(settings: BffSettings) -> PollingPolicy:
    policy = load_policy(settings.protocol.policy_path)
    for service in policy.services:
        if settings.upstreams.order_source_url(service) is None:
            raise PolicyError(f"service {service!r} of the policy has no order source URL")
    return policy


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

    async def engine_ctx(app: web.Application) -> AsyncIterator[None]:
        session = app[HTTP_SESSION]
        tags_client = await OrderTagsClient.create(
            settings.order_tags_url,
            settings.service_token.get_secret_value(),
            deadline_s=protocol.tags_deadline_s,
            session=session,
        )
        sources = {
            service: await OrderSourceClient.create(
                service,
                settings.upstreams.order_source_url(service) or "",
                deadline_s=protocol.source_deadline_s,
                session=session,
            )
            for service in policy.services
        }
        tag_cache = TagCache(
            tags_client,
            CircuitBreaker(protocol.circuit_failures, protocol.circuit_open_s),
            app[BFF_METRICS],
        )
        app[TAG_CACHE] = tag_cache
        app[ENGINE] = OrdersStateEngine(
            policy,
            sources,
            tag_cache,
            EngineConfig(
                timings=protocol.timings(),
                interval=protocol.interval_rules(),
                overload_in_flight=protocol.overload_in_flight,
                overload_max_factor=protocol.overload_max_factor,
            ),
            app[BFF_METRICS],
        )
        yield
        await asyncio.gather(tags_client.close(), *(s.close() for s in sources.values()))

    app.cleanup_ctx.extend([http_session_ctx, engine_ctx])


def user_id(request: web.Request) -> str:
    """The gateway authenticates the user and passes X-Yandex-UID; no user, no answer."""
    value = request.headers.get(USER_HEADER, "").strip()
    if not value:
        raise Unauthorized(f"{USER_HEADER} is required", code="unauthorized")
    return value


def upstream_headers(request: web.Request) -> dict[str, str]:
    """Headers forwarded to upstreams; the request id is generated when absent."""
    headers = {
        name: request.headers[name]
        for name in ("User-Agent", "Accept-Language", USER_HEADER)
        if name in request.headers
    }
    headers["X-Request-Id"] = request_id(request)
    return headers


async def poll(
    request: web.Request, known_orders: list[dict[str, Any]], supported: list[str] | None
) -> tuple[list[str], PollResult]:
    """The poll both client-facing endpoints make: validate, then run the engine.
    Returns the queried services and the result."""
    policy = request.app[POLICY]
    known = parse_known_orders(known_orders, policy, request.app[LIMITS])
    services = queried_services(supported, known, policy)
    return services, await request.app[ENGINE].poll(known, services, upstream_headers(request))

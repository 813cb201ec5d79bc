from __future__ import annotations

import hmac
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import Counter

from services.order_tags import handlers
from services.order_tags.config import OrderTagsSettings
from services.order_tags.keys import TAG_STORE
from services.order_tags.storage import RedisTagStore
from shared.errors import Unauthorized
from shared.redis import redis_client
from shared.web import METRICS, PING_CHECK, create_base_app

SERVICE = "order_tags"


def bearer_challenge(given: str | None) -> str:
    """RFC 6750 §3: no credentials, the scheme and realm alone; credentials refused, also
    `error="invalid_token"` (a caller with the wrong token configured, not one without)."""
    if given is None:
        return 'Bearer realm="order_tags"'
    return 'Bearer realm="order_tags", error="invalid_token"'


def auth_middleware(token: str) -> Middleware:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/v1/"):
            given = request.headers.get("Authorization")
            # constant time: the token must not leak through response timing
            if given is None or not hmac.compare_digest(
                given.encode(errors="surrogateescape"), expected
            ):
                raise Unauthorized(
                    "a valid 'Authorization: Bearer <service token>' is required",
                    headers={"WWW-Authenticate": bearer_challenge(given)},
                )
        return await handler(request)

    return middleware


def create_app(settings: OrderTagsSettings) -> web.Application:
    app = create_base_app(SERVICE, settings)
    app.middlewares.append(auth_middleware(settings.service_token.get_secret_value()))
    # hedging hides a lossy link from the callers: this is where it shows
    hedges = Counter(
        "mlutp_redis_hedges",
        "Redis calls sent once more after no answer within REDIS_HEDGE_AFTER_S (sent), or "
        "not, the hedge budget being spent (over_budget)",
        ["outcome"],
        registry=app[METRICS].registry,
    )

    async def tag_store_ctx(app: web.Application) -> AsyncIterator[None]:
        async with redis_client(settings.redis) as redis:
            store = RedisTagStore(
                redis,
                ttl_s=settings.redis.key_ttl_s,
                deadline_s=settings.redis.command_deadline_s,
                hedge_after_s=settings.redis.hedge_after_s,
                on_hedge=lambda outcome: hedges.labels(outcome).inc(),
            )
            app[TAG_STORE] = store
            app[PING_CHECK] = store.ping
            yield

    app.cleanup_ctx.append(tag_store_ctx)
    app.router.add_post("/v1/tags/get", handlers.get_tags)
    app.router.add_post("/v1/tags/set", handlers.set_tags)
    app.router.add_post("/v1/tags/create", handlers.create_tags)
    app.router.add_post("/v1/tags/bump", handlers.bump_tags)
    app.router.add_post("/v1/tags/delete", handlers.delete_tags)
    app.router.add_post("/v1/lists/bump", handlers.bump_list)
    app.router.add_post("/v1/lists/keep", handlers.keep_answer)
    app.router.add_post("/v1/lists/keep_many", handlers.keep_answers)
    return app

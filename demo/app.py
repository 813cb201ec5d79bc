from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from demo import handlers
from demo.config import DemoSettings
from demo.keys import SETTINGS, TAG_CACHE_SWITCH, UPSTREAMS
from demo.tag_cache_switch import TagCacheSwitch
from demo.upstream import DemoUpstreams
from shared.web import create_base_app

SERVICE = "demo"


def create_app(settings: DemoSettings) -> web.Application:
    app = create_base_app(SERVICE, settings)
    app[SETTINGS] = settings

    async def upstreams_ctx(app: web.Application) -> AsyncIterator[None]:
        app[UPSTREAMS] = DemoUpstreams.create(settings.user_id, settings.proxy_timeout_s)
        yield
        await app[UPSTREAMS].close()

    async def switch_ctx(app: web.Application) -> AsyncIterator[None]:
        switch = None
        if settings.tag_cache_switch and settings.redis_url:
            switch = TagCacheSwitch.create(settings.redis_url)
        app[TAG_CACHE_SWITCH] = switch
        yield
        if switch is not None:
            await switch.close()

    app.cleanup_ctx.extend([upstreams_ctx, switch_ctx])
    router = app.router
    router.add_get("/", handlers.index)
    router.add_static("/static/", handlers.STATIC)
    router.add_get("/demo/v1/config", handlers.config)
    router.add_get("/demo/v1/traffic", handlers.traffic)
    router.add_post("/demo/v1/orders", handlers.create_order)
    router.add_post("/demo/v1/orders/{service}/{orderid}/advance", handlers.advance)
    router.add_post("/demo/v1/features/{service}/{orderid}/{feature}", handlers.feature)
    router.add_post("/demo/v1/faults", handlers.set_fault)
    router.add_post("/4.0/launch", handlers.launch)
    router.add_post("/mlutp/{tail:.+}", handlers.orders_state)
    return app

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import Counter

from emulator import feature_handlers, handlers
from emulator.config import EmulatorSettings
from emulator.driver import Driver
from emulator.faults import Faults
from emulator.features import Features
from emulator.keys import DRIVER, FAULTS, FEATURES, STATS, TAG_WRITER, WORLD
from emulator.stats import Stats
from emulator.world import FEATURES as USER_FEATURES
from emulator.world import World
from shared.http import HTTP_SESSION, http_session_ctx
from shared.order_tags_client import OrderTagsClient
from shared.policy import load_policy
from shared.tag_writer import TagWriter
from shared.web import METRICS, create_base_app

SERVICE = "emulator"


def create_app(settings: EmulatorSettings) -> web.Application:
    app = create_base_app(SERVICE, settings)
    policy = load_policy(settings.policy_path)
    app[WORLD] = World()
    # the work the upstreams did (emulator/work.py), as the stats endpoint counts it
    work = Counter(
        "mlutp_emulator_upstream_work",
        "Work units the emulated upstreams spent building their answers (docs/development.md: "
        "Upstream work), by upstream endpoint",
        ["upstream"],
        registry=app[METRICS].registry,
    )
    app[STATS] = Stats(on_work=lambda upstream, units: work.labels(upstream).inc(units))
    app[FAULTS] = Faults()

    async def features_ctx(app: web.Application) -> AsyncIterator[None]:
        tags = OrderTagsClient(
            settings.order_tags_url,
            settings.service_token.get_secret_value(),
            deadline_s=settings.order_tags_deadline_s,
            session=app[HTTP_SESSION],
        )
        # the world keeps the outbox: the writer sends what the features record there
        writer = TagWriter(
            tags, app[WORLD].outbox, settings.tag_writer, registry=app[METRICS].registry
        )
        app[TAG_WRITER] = writer
        app[FEATURES] = Features(app[WORLD], writer, policy)
        writer.start()
        yield
        await writer.close()
        await tags.close()

    async def driver_ctx(app: web.Application) -> AsyncIterator[None]:
        driver = Driver(app[FEATURES], settings.driver)
        app[DRIVER] = driver
        task = asyncio.create_task(driver.run(), name="emulator-driver")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.extend([http_session_ctx, features_ctx, driver_ctx])
    router = app.router
    router.add_post("/sources/{service}/v1/orders/active", handlers.order_source)
    router.add_post("/3.0/taxiontheway", handlers.taxiontheway)
    router.add_post("/{service}/v1/orders/details", handlers.order_details)
    router.add_post("/taxiroute/v1/route", handlers.taxiroute)
    router.add_post("/parts/{part_type}", handlers.generic_part)
    router.add_post("/emulator/v1/orders", handlers.create_order)
    router.add_post("/emulator/v1/orders/{service}/{orderid}/advance", handlers.advance_order)
    router.add_post("/emulator/v1/orders/{service}/{orderid}/change", handlers.change_order)
    router.add_post("/emulator/v1/orders/taxi/{orderid}/driver", handlers.place_driver)
    features = "/emulator/v1/features/{service}/{orderid}"
    # a route per feature, each with its own body: versioned or last-write-wins
    feature_kinds = {name: f.versioned for fs in USER_FEATURES.values() for name, f in fs.items()}
    for name, versioned in sorted(feature_kinds.items()):
        handler = (
            feature_handlers.versioned_change
            if versioned
            else feature_handlers.last_write_wins_change
        )
        router.add_post(f"{features}/{name}", handler)
    router.add_post(f"{features}/feedback", feature_handlers.feedback)
    router.add_post(f"{features}/cancel", feature_handlers.cancel)
    router.add_post("/emulator/v1/faults", handlers.set_fault)
    router.add_get("/emulator/v1/stats", handlers.get_stats)
    router.add_post("/emulator/v1/driver", handlers.set_driver)
    router.add_get("/emulator/v1/changes", handlers.get_changes)
    return app

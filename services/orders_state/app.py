from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from services.bff.keys import ENGINE, POLICY
from services.bff.resources import setup_bff
from services.orders_state import handlers
from services.orders_state.config import OrdersStateSettings
from services.orders_state.keys import MAX_PART_ORDERS, WAITING
from services.orders_state.metrics import WaitingMetrics
from services.orders_state.waiting import WaitingConfig, WaitingPolls
from services.orders_state.wakeups import WAKEUPS_CLIENT_NAME, TagWakeups
from shared.policy import PollingType
from shared.redis import create_redis
from shared.web import METRICS, create_base_app

SERVICE = "orders_state"

log = logging.getLogger("mlutp.orders_state")


def create_app(settings: OrdersStateSettings) -> web.Application:
    app = create_base_app(SERVICE, settings)
    setup_bff(app, settings)
    policy = app[POLICY]
    protocol = settings.protocol
    app[MAX_PART_ORDERS] = protocol.max_part_orders

    async def waiting_ctx(app: web.Application) -> AsyncIterator[None]:
        wakeups: TagWakeups | None = None
        metrics = WaitingMetrics(app[METRICS].registry)
        redis = settings.redis
        if redis.url or redis.cluster_nodes:
            wakeups = TagWakeups(
                create_redis(redis, client_name=WAKEUPS_CLIENT_NAME, retry_lost_connection=False),
                redis,
                metrics,
                linger_s=settings.wakeup_linger_s,
                keepalive_s=settings.wakeup_keepalive_s,
            )
            await wakeups.start()
        else:
            log.warning("no REDIS_URL or REDIS_CLUSTER_NODES: polls will not wait")
        app[WAITING] = WaitingPolls(
            app[ENGINE],
            wakeups,
            WaitingConfig(
                max_waiting=settings.max_waiting,
                subscribe_deadline_s=settings.wakeup_subscribe_deadline_s,
                wakeup_settle_s=settings.wakeup_settle_s,
                interval_max_ms=protocol.interval_max_ms,
            ),
            metrics,
        )
        yield
        if wakeups is not None:
            await wakeups.close()
            await wakeups.redis.aclose()

    async def answer_waiting_polls(app: web.Application) -> None:
        # SIGTERM: on_shutdown runs before aiohttp waits for the handlers in flight
        app[WAITING].shutdown()

    app.cleanup_ctx.append(waiting_ctx)
    app.on_shutdown.append(answer_waiting_polls)
    app.router.add_post("/mlutp/v1/orders/state", handlers.orders_state)
    app.router.add_post("/3.0/taxiontheway", handlers.taxiontheway)
    # every rule's url is served, those of deprecated policy versions too
    for endpoint in policy.endpoints:
        if endpoint.rule.polling_type is PollingType.ROUTE_DISTANCE_DEPENDED:
            app.router.add_post(endpoint.rule.url, handlers.route_handler(endpoint))
        else:
            app.router.add_post(endpoint.rule.url, handlers.part_handler(endpoint))
    return app

"""The waiting polls' resource: the wake-ups' pub/sub connections (on the Redis order_tags
writes to) and the waiting polls over the engine, opened on startup and closed on cleanup;
every waiting poll is answered at once on SIGTERM."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from aiohttp import web

from services.bff.resources import ADMISSION, ENGINE
from services.orders_state.config import OrdersStateSettings
from services.orders_state.waiting.metrics import WaitingMetrics
from services.orders_state.waiting.polls import WaitingPolls
from services.orders_state.waiting.shard import WAKEUPS_CLIENT_NAME
from services.orders_state.waiting.wakeups import TagWakeups
from shared.protocol.waiting import WaitingConfig, WakeupTimings
from shared.redis import create_redis
from shared.web import METRICS, needs

log = logging.getLogger("mlutp.waiting")

WAITING = web.AppKey("waiting", WaitingPolls)


# -- the core's objects, from the settings


def waiting_config(settings: OrdersStateSettings) -> WaitingConfig:
    """The waiting polls' config (the service and the simulation build their waiting polls
    with it); the shed factor is no setting, WaitingConfig's own."""
    return WaitingConfig(
        max_waiting=settings.max_waiting,
        max_waiting_per_user=settings.waiting.max_per_user,
        subscribe_deadline_s=settings.waiting.subscribe_deadline_s,
        wakeup_settle_s=settings.waiting.settle_s,
        watch_cache=settings.watch_cache,
        tags_read_within_s=settings.waiting.tags_read_within_s,
        interval_max_ms=settings.protocol.interval.max_ms,
    )


def wakeup_timings(settings: OrdersStateSettings) -> WakeupTimings:
    """The wake-ups' pub/sub timings."""
    return WakeupTimings(
        linger_s=settings.waiting.linger_s, keepalive_s=settings.waiting.keepalive_s
    )


# -- the resource


def setup_waiting(app: web.Application, settings: OrdersStateSettings) -> None:
    """After the engine's setup (the waiting polls look through it)."""

    async def waiting_ctx(app: web.Application) -> AsyncIterator[None]:
        engine = needs(app, ENGINE, "the waiting polls")
        wakeups: TagWakeups | None = None
        metrics = WaitingMetrics(app[METRICS].registry)
        redis = settings.redis
        if redis.url or redis.cluster_nodes:
            wakeups = TagWakeups(
                create_redis(redis, client_name=WAKEUPS_CLIENT_NAME, retry_lost_connection=False),
                redis,
                metrics,
                wakeup_timings(settings),
            )
            await wakeups.start()
        else:
            log.warning("no REDIS_URL or REDIS_CLUSTER_NODES: polls will not wait")
        app[WAITING] = WaitingPolls(
            engine,
            needs(app, ADMISSION, "the waiting polls"),
            wakeups,
            waiting_config(settings),
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

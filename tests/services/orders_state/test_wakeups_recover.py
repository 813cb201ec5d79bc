"""Wake-ups come back by themselves (docs/protocol.md: Waiting poll): after Redis restarts, after
the pub/sub connection is killed, and after a Redis `timeout` closes it while idle, waiting
works again, on one Redis and on a three-master cluster, without restarting orders_state.
Each test kills, restarts or reconfigures a Redis it started itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from services.orders_state.waiting.shard import WAKEUPS_CLIENT_NAME
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis, EmbeddedRedisCluster
from tests.emulator_api import change, create_order_id
from tests.helpers import (
    ClusterTags,
    all_tags,
    cluster_client,
    cluster_settings,
    held,
    one_order_per_shard,
    poll_order,
    stack_on,
)
from tests.told_metrics import ToldMetrics, told_metrics

FAULTS = ["redis_restart", "client_kill", "idle_timeout"]
# long enough that a server `timeout` of 1 s closes the idle connection between two PINGs
SLOW_KEEPALIVE_S = 30.0


def lost(metrics: ToldMetrics) -> float:
    """Pub/sub connections lost since start."""
    return metrics.value("mlutp_wakeup_pubsub_lost_total")


def up(metrics: ToldMetrics) -> bool:
    """Every pub/sub connection is up."""
    return metrics.value("mlutp_wakeup_pubsub_up") == 1


def nothing_subscribed(metrics: ToldMetrics) -> bool:
    return metrics.value("mlutp_wakeup_channels") == 0


async def woken(
    client: TestClient,
    emulator: TestClient,
    tags_of: Callable[[str], dict[str, str]],
    user: str,
    orderid: str | None = None,
) -> None:
    """A caught-up poll of the user's order (a new one unless given) is held, and a change
    of the order wakes it."""
    if orderid is None:
        orderid = await create_order_id(emulator, user, status="driving")
    tags = tags_of(orderid)
    waiting = asyncio.create_task(poll_order(client, user, orderid, tags, wait_ms=20_000))
    await held(client, waiting)
    await change(emulator, "taxi", orderid, {"comment": f"seen by {user}"})
    order, headers = await waiting
    assert headers["X-Mlutp-Wait"] == "wakeup"
    assert "rarely_changed" in order["need_request"]


@pytest.fixture
def own_sync(own_redis: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    yield client
    client.close()


@pytest.mark.parametrize("fault", FAULTS)
async def test_waiting_works_again_after_the_pub_sub_connection_is_lost(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    own_sync: redis.Redis,
    unique: str,
    fault: str,
):
    settings = RedisSettings(url=own_redis.url, command_deadline_s=1.0, socket_timeout_s=1.0)
    emulator, client = await stack_on(
        aiohttp_client,
        aiohttp_server,
        settings,
        waiting={"keepalive_s": SLOW_KEEPALIVE_S, "linger_s": 0.2},
    )
    metrics = told_metrics(client)

    def tags_of(orderid: str) -> dict[str, str]:
        return all_tags(own_sync, orderid, age_ms=60_000)

    await woken(client, emulator, tags_of, f"{unique}-before")
    user = unique
    orderid = await create_order_id(emulator, user, status="driving")

    if fault == "redis_restart":
        own_redis.stop()
        await metrics.until(lambda m: lost(m) == 1)
        own_redis.start()
        # the data went with the server: a new order (of a user of its own, so each poll
        # lists one), tags written after the restart
        user = f"{unique}-restarted"
        orderid = await create_order_id(emulator, user, status="driving")
    elif fault == "client_kill":
        # kill it while a poll waits on the order, so its channel is one to subscribe again
        waiting = asyncio.create_task(
            poll_order(client, unique, orderid, tags_of(orderid), wait_ms=20_000)
        )
        await held(client, waiting)
        own_sync.client_kill_filter(_type="pubsub")
        _, headers = await waiting
        assert headers["X-Mlutp-Wait"] == "unavailable"
    else:
        # a connection with no subscription is idle to Redis, which closes it past `timeout`
        await metrics.until(nothing_subscribed)
        own_sync.config_set("timeout", 1)
        await metrics.until(lambda m: lost(m) == 1)
        own_sync.config_set("timeout", 0)

    await metrics.until(up)
    assert lost(metrics) == 1
    # the order a poll waited on when the connection was lost is listened to again
    await woken(client, emulator, tags_of, user, orderid)
    await woken(client, emulator, tags_of, f"{unique}-after")
    metrics = await (await client.get("/metrics")).text()
    assert "mlutp_wakeup_pubsub_up 1.0" in metrics
    assert "mlutp_wakeup_pubsub_lost_total 1.0" in metrics


async def test_an_idle_connection_kept_alive_outlives_the_server_timeout(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    own_sync: redis.Redis,
    unique: str,
):
    settings = RedisSettings(url=own_redis.url, command_deadline_s=1.0, socket_timeout_s=1.0)
    emulator, client = await stack_on(
        aiohttp_client, aiohttp_server, settings, waiting={"keepalive_s": 0.3}
    )
    metrics = told_metrics(client)
    await metrics.until(up)
    own_sync.config_set("timeout", 1)
    # idleness is the absence of events: three server timeouts pass with nothing to await
    await asyncio.sleep(3.0)
    assert lost(metrics) == 0 and up(metrics)
    await woken(client, emulator, lambda o: all_tags(own_sync, o, age_ms=60_000), unique)


@pytest.mark.parametrize("fault", FAULTS)
async def test_waiting_works_again_on_every_shard_of_a_cluster(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    cluster: EmbeddedRedisCluster,
    unique: str,
    fault: str,
):
    settings = cluster_settings(cluster)
    emulator, client = await stack_on(
        aiohttp_client,
        aiohttp_server,
        settings,
        waiting={"keepalive_s": SLOW_KEEPALIVE_S, "linger_s": 0.2},
    )
    metrics = told_metrics(client)
    await metrics.until(up)
    nodes = [redis.Redis(host=n.host, port=n.port, decode_responses=True) for n in cluster.nodes]
    sync = cluster_client(cluster)
    tags = ClusterTags(sync)
    try:
        if fault == "redis_restart":
            await asyncio.to_thread(cluster.restart, 0)
            expected_losses = 1
        elif fault == "client_kill":
            for node in nodes:
                # an idle connection is no `pubsub` client to Redis: found by its name
                for listed in node.client_list():
                    if listed["name"] == WAKEUPS_CLIENT_NAME:
                        node.client_kill_filter(_id=listed["id"])
            expected_losses = len(nodes)
        else:
            await metrics.until(nothing_subscribed)
            for node in nodes:
                node.config_set("timeout", 1)
            expected_losses = len(nodes)
        await metrics.until(lambda m: lost(m) >= expected_losses)
        for node in nodes:
            node.config_set("timeout", 0)
        await metrics.until(up)

        by_shard = await one_order_per_shard(emulator, sync, len(nodes), unique)
        for user, orderid in by_shard.values():
            await woken(client, emulator, lambda o: all_tags(tags, o, age_ms=60_000), user, orderid)
    finally:
        for node in nodes:
            node.close()
        sync.close()

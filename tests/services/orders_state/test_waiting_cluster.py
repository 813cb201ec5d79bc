"""The waiting poll on a three-master Redis Cluster: tag writes are published on the order's
shard (sharded pub/sub), and orders_state listens on every shard, so a change on each shard
wakes the polls waiting on it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp.test_utils import TestClient, TestServer

from shared.embedded_redis import EmbeddedRedisCluster
from tests.emulator_api import change
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


async def test_a_change_on_each_shard_wakes_its_waiting_poll(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    cluster: EmbeddedRedisCluster,
    unique: str,
):
    emulator, client = await stack_on(aiohttp_client, aiohttp_server, cluster_settings(cluster))
    sync = cluster_client(cluster)
    # one order on each master, each of a user of its own
    by_shard = await one_order_per_shard(emulator, sync, len(cluster.nodes), unique)

    for shard, (user, orderid) in by_shard.items():
        tags = all_tags(ClusterTags(sync), orderid, age_ms=60_000)  # type: ignore[arg-type]
        waiting = asyncio.create_task(poll_order(client, user, orderid, tags, wait_ms=20_000))
        await held(client, waiting)
        await change(emulator, "taxi", orderid, {"comment": f"on {shard}"})
        order, headers = await waiting
        assert headers["X-Mlutp-Wait"] == "wakeup", shard
        assert "rarely_changed" in order["need_request"]
    sync.close()

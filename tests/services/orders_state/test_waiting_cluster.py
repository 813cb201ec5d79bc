"""The waiting poll on a three-master Redis Cluster: tag writes are published on the order's
shard (sharded pub/sub), and orders_state listens on every shard, so a change on each shard
wakes the polls waiting on it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedisCluster
from shared.redis import tags_key
from tests.emulator_api import change, create_order_id
from tests.helpers import all_tags, held, poll_order, stack_on


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedRedisCluster]:
    cluster = EmbeddedRedisCluster(masters=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


async def test_a_change_on_each_shard_wakes_its_waiting_poll(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    cluster: EmbeddedRedisCluster,
    unique: str,
):
    # generous sockets too: a loaded CI run saw a shard's pub/sub connection time out (0.2 s
    # default) and reconnect, and a poll meanwhile answered at once (`unavailable`)
    settings = RedisSettings(
        cluster_nodes=cluster.startup_nodes,
        command_deadline_s=2.0,
        socket_timeout_s=1.0,
        connect_timeout_s=1.0,
    )
    emulator, client = await stack_on(aiohttp_client, aiohttp_server, settings)
    sync = redis.RedisCluster.from_url(
        f"redis://{cluster.startup_nodes.split(',')[0]}", decode_responses=True
    )
    # one order on each master, each of a user of its own
    by_shard: dict[str, tuple[str, str]] = {}
    for attempt in range(200):
        if len(by_shard) == len(cluster.nodes):
            break
        user = f"{unique}-{attempt}"
        orderid = await create_order_id(emulator, user, status="driving")
        node = sync.get_node_from_key(tags_key("taxi", orderid))
        by_shard.setdefault(node.name, (user, orderid))
    assert len(by_shard) == len(cluster.nodes)

    class ClusterTags:
        def hgetall(self, key: str) -> dict[str, str]:
            stored: dict[str, str] = sync.hgetall(key)
            return stored

    for shard, (user, orderid) in by_shard.items():
        tags = all_tags(ClusterTags(), orderid, age_ms=60_000)  # type: ignore[arg-type]
        waiting = asyncio.create_task(poll_order(client, user, orderid, tags, wait_ms=20_000))
        await held(client, waiting)
        await change(emulator, "taxi", orderid, {"comment": f"on {shard}"})
        order, headers = await waiting
        assert headers["X-Mlutp-Wait"] == "wakeup", shard
        assert "rarely_changed" in order["need_request"]
    sync.close()

"""The waiting poll on a three-master Redis Cluster: tag writes are published on the order's
shard (sharded pub/sub), and orders_state listens on every shard, so a change on each shard
wakes the polls waiting on it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from emulator.app import create_app as create_emulator
from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from services.orders_state.app import create_app
from services.orders_state.config import OrdersStateSettings
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedisCluster
from shared.redis import tags_key
from tests.conftest import TEST_TOKEN, emulator_settings
from tests.emulator_api import change, create_order_id
from tests.services.conftest import bff_kwargs
from tests.services.orders_state.test_poll import all_tags
from tests.services.orders_state.test_waiting import held, state


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
    settings = RedisSettings(cluster_nodes=cluster.startup_nodes, command_deadline_s=2.0)
    tags_server = await aiohttp_server(
        create_order_tags(OrderTagsSettings(port=0, service_token=TEST_TOKEN, redis=settings))
    )
    emulator_server = await aiohttp_server(create_emulator(emulator_settings(tags_server)))
    emulator = await aiohttp_client(emulator_server)
    client = await aiohttp_client(
        create_app(OrdersStateSettings(**bff_kwargs(tags_server, emulator_server), redis=settings))
    )
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
        waiting = asyncio.create_task(state(client, user, orderid, tags, wait_ms=20_000))
        await held(client, waiting)
        await change(emulator, "taxi", orderid, {"comment": f"on {shard}"})
        order, headers = await waiting
        assert headers["X-Mlutp-Wait"] == "wakeup", shard
        assert "rarely_changed" in order["need_request"]
    sync.close()

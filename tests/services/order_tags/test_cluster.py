"""order_tags on a Redis Cluster (three masters started here): reached by a list of nodes,
orders spread over the shards by their `{service:orderid}` hash tag, a batch `get` across
slots answers, writes stay atomic per order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import pytest
import redis
from aiohttp.test_utils import TestClient

from services.order_tags.app import create_app
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis, EmbeddedRedisCluster
from tests.services.order_tags.conftest import AUTH, order_tags_settings


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[EmbeddedRedis]]:
    cluster = EmbeddedRedisCluster(masters=3)
    try:
        cluster.start()
        yield cluster.nodes
    finally:
        cluster.close()


@pytest.fixture
async def cluster_client(
    aiohttp_client: Callable[..., Awaitable[TestClient]], cluster: list[EmbeddedRedis]
) -> TestClient:
    nodes = ",".join(f"127.0.0.1:{node.port}" for node in cluster)
    # unhedged: a hedged read counts its forces twice when both attempts run (the store's
    # accepted cost: fewer forces honoured, never more), and these tests count forces exactly;
    # on a loaded machine a read slower than the hedge's 10 ms was sent twice
    redis = RedisSettings(cluster_nodes=nodes, command_deadline_s=2.0, hedge_after_s=0)
    settings = order_tags_settings(redis)
    return await aiohttp_client(create_app(settings))


async def test_orders_spread_over_the_shards_and_a_batch_get_spans_them(
    cluster_client: TestClient, cluster: list[EmbeddedRedis], unique: str
):
    orders = [{"service": "taxi", "orderid": f"{unique}-{i}"} for i in range(30)]
    for i, order in enumerate(orders):
        resp = await cluster_client.post(
            "/v1/tags/set", json={**order, "tags": {"fast_info": f"v{i}"}}, headers=AUTH
        )
        assert resp.status == 200, await resp.text()
    sizes = [redis.Redis(port=node.port).dbsize() for node in cluster]
    assert all(size > 0 for size in sizes), sizes  # every shard holds some orders
    resp = await cluster_client.post("/v1/tags/get", json={"orders": orders}, headers=AUTH)
    assert resp.status == 200
    got = (await resp.json())["orders"]
    assert [o["tags"] for o in got] == [{"fast_info": f"v{i}"} for i in range(30)]
    # one create call for orders on every shard: each keeps its tag and gains the new part
    resp = await cluster_client.post(
        "/v1/tags/create",
        json={"orders": [{**order, "parts": ["fast_info", "chat"]} for order in orders]},
        headers=AUTH,
    )
    assert resp.status == 200, await resp.text()
    created = (await resp.json())["orders"]
    assert [o["tags"]["fast_info"] for o in created] == [f"v{i}" for i in range(30)]
    assert all(o["tags"]["chat"] for o in created)


async def test_set_only_if_absent_bump_and_delete_on_the_cluster(
    cluster_client: TestClient, unique: str
):
    order = {"service": "eats", "orderid": unique}
    await cluster_client.post(
        "/v1/tags/set", json={**order, "tags": {"full_info": "a"}}, headers=AUTH
    )
    resp = await cluster_client.post(
        "/v1/tags/set",
        json={**order, "tags": {"full_info": "b", "other": "c"}, "only_if_absent": True},
        headers=AUTH,
    )
    assert (await resp.json())["tags"] == {"full_info": "a", "other": "c"}
    resp = await cluster_client.post(
        "/v1/tags/bump", json={**order, "parts": ["full_info"]}, headers=AUTH
    )
    assert (await resp.json())["tags"]["full_info"] != "a"
    resp = await cluster_client.post("/v1/tags/delete", json=order, headers=AUTH)
    assert await resp.json() == {"deleted": True}


async def test_the_force_budget_on_the_cluster_counts_only_the_owners_force(
    cluster_client: TestClient, cluster: list[EmbeddedRedis], unique: str
):
    """The owner checked where the force is counted, on the order's shard (its hash and the
    counts share its hash tag): forces on made-up orders and another's order write nothing."""
    owner, intruder = f"{unique}-owner", f"{unique}-intruder"
    owned = [{"service": "taxi", "orderid": f"{unique}-{i}"} for i in range(10)]
    resp = await cluster_client.post(
        "/v1/tags/create",
        json={"orders": [{**o, "parts": ["fast_info"], "user_id": owner} for o in owned]},
        headers=AUTH,
    )
    assert resp.status == 200

    def keys() -> list[bytes]:
        return sorted(
            key
            for node in cluster
            for key in redis.Redis(port=node.port).scan_iter(match=f"*{unique}*")
        )

    async def forced(forces: list[dict[str, str]]) -> list[bool]:
        orders = [{"service": f["service"], "orderid": f["orderid"]} for f in forces]
        resp = await cluster_client.post(
            "/v1/tags/get",
            json={"orders": orders, "force": forces, "force_per_minute": 2},
            headers=AUTH,
        )
        assert resp.status == 200, await resp.text()
        return list((await resp.json())["forced"])

    stored = keys()
    made_up = [
        {"service": "eats", "orderid": f"{unique}-x{i}", "user_id": owner} for i in range(20)
    ]
    assert await forced(made_up) == [False] * 20
    assert await forced([{**o, "user_id": intruder} for o in owned]) == [False] * 10
    assert keys() == stored
    by_owner = [{**o, "user_id": owner} for o in owned]
    assert [await forced(by_owner) for _ in range(3)] == [[True] * 10, [True] * 10, [False] * 10]
    assert len(keys()) == len(stored) + 10

"""Helpers the tests share: building the services' settings, client tags as the server issues
them, polls as a client sends them, waiting for a poll to be held, and the like. Fixtures
live in the conftest files; no test module imports another."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
from aiohttp.test_utils import TestClient, TestServer
from pydantic_settings import BaseSettings

from emulator.app import create_app as create_emulator
from services.bff.config import ProtocolSettings, UpstreamSettings
from services.bff.resources import ENGINE
from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.config import RedisSettings, operator_variables
from shared.embedded_redis import EmbeddedRedisCluster
from shared.policy import load_policy
from shared.protocol.tags import encode_tag
from shared.redis import tags_key
from tests.conftest import TEST_TOKEN, emulator_settings
from tests.emulator_api import create_order_id
from tests.told_metrics import told_metrics

# a factory fixture's type: `make_orders_state(**settings)` and the like (conftest)
MakeApp = Callable[..., Awaitable[TestClient]]

POLICY = load_policy()


# the first layout of taxi parts, still served to old clients (policy file: `deprecated`)
DEPRECATED_TAXI_VERSION = POLICY.services["taxi"].deprecated[0].policy_version


def protocol_for_tests(**overrides: Any) -> ProtocolSettings:
    """No jitter: tests compare intervals exactly. Deadlines generous: a shared, noisy
    machine must not make the cache or a source look down where a test does not mean it;
    tests of deadlines set their own."""
    values: dict[str, Any] = {
        "interval": {"jitter": 0.0},
        "tags_deadline_s": 1.0,
        "source_deadline_s": 1.0,
    }
    return ProtocolSettings(**{**values, **overrides})


PROTOCOL = protocol_for_tests()


def bff_kwargs(
    order_tags: TestServer, emulator: TestServer, protocol: ProtocolSettings = PROTOCOL
) -> dict[str, Any]:
    return {
        "port": 0,
        "service_token": TEST_TOKEN,
        "order_tags_url": str(order_tags.make_url("")),
        "upstreams": UpstreamSettings(emulator_url=str(emulator.make_url(""))),
        "protocol": protocol,
    }


def now_ms() -> int:
    return int(time.time() * 1000)


def client_tag(
    service: str, content: str | None, age_ms: int = 0, *, degraded: bool = False
) -> str:
    """A tag as the server issues it, for `content`, issued `age_ms` ago (`degraded`: while
    the tag cache was down)."""
    return encode_tag(POLICY.version(service), content, now_ms() - age_ms, degraded=degraded)


async def create(
    emulator: TestClient, user: str, service: str = "taxi", status: str | None = None
) -> str:
    body: dict[str, Any] = {"user_id": user, "service": service}
    if status:
        body["status"] = status
    resp = await emulator.post("/emulator/v1/orders", json=body)
    assert resp.status == 200, await resp.text()
    orderid: str = (await resp.json())["orderid"]
    return orderid


async def poll(
    client: TestClient, user: str, body: dict[str, Any], path: str = "/mlutp/v1/orders/state"
) -> tuple[int, dict[str, Any], int | None]:
    resp = await client.post(path, json=body, headers={"X-Yandex-UID": user})
    interval = resp.headers.get("X-Yataxi-Polling-Interval-Ms")
    return resp.status, await resp.json(), int(interval) if interval else None


TAXI_TAG_DEFINED = ["fast_info", "rarely_changed", "static", "chat", "slow"]


def all_tags(redis_sync: redis.Redis, orderid: str, service: str = "taxi", age_ms: int = 0) -> dict:
    """Client tags for every tag_defined part, as if fetched now with the stored contents."""
    stored = redis_sync.hgetall(tags_key(service, orderid))
    parts = TAXI_TAG_DEFINED if service == "taxi" else ["full_info"]
    return {part: client_tag(service, stored.get(part), age_ms) for part in parts}


async def poll_one(
    orders_state: TestClient, user: str, orderid: str, tags: dict[str, str], **extra: Any
) -> dict[str, Any]:
    """Poll with one known taxi order and these client tags."""
    known = {"orderid": orderid, "service": "taxi", "status": "searching", "tags": tags, **extra}
    _, body, _ = await poll(orders_state, user, {"known_orders": [known]})
    return body


STATE = "/mlutp/v1/orders/state"


async def poll_order(
    client: TestClient, user: str, orderid: str, tags: dict[str, str], **extra: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    """One poll with one known taxi order (status driving); the order and the headers."""
    known = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}
    body = {"known_orders": [{**known, **extra.pop("known", {})}], **extra}
    resp = await client.post(STATE, json=body, headers={"X-Yandex-UID": user})
    assert resp.status == 200, await resp.text()
    [order] = (await resp.json())["orders"]
    return order, dict(resp.headers)


async def held(client: TestClient, waiting: asyncio.Task[Any], count: int = 1) -> None:
    """Until the server holds `count` polls (its mlutp_polls_held gauge); fails if the poll
    was answered instead."""
    metrics = told_metrics(client)
    holding = asyncio.ensure_future(
        metrics.until(lambda m: m.value("mlutp_polls_held") == count, timeout_s=10)
    )
    try:
        await asyncio.wait([holding, waiting], return_when=asyncio.FIRST_COMPLETED)
    finally:
        holding.cancel()
    assert not waiting.done(), f"answered instead of held: {waiting.result()}"
    holding.result()


async def caught_up(
    emulator: TestClient, redis_sync: redis.Redis, user: str
) -> tuple[str, dict[str, str]]:
    """A driving order and client tags of everything as stored: a poll with them has no news."""
    orderid = await create_order_id(emulator, user, status="driving")
    return orderid, all_tags(redis_sync, orderid, age_ms=60_000)


async def stack_on(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    settings: RedisSettings,
    **state_settings: Any,
) -> tuple[TestClient, TestClient]:
    """order_tags, the emulator and orders_state on this Redis (or cluster): the emulator's
    client and orders_state's."""
    emulator, [orders_state] = await replicas_on(
        aiohttp_client, aiohttp_server, settings, 1, **state_settings
    )
    return emulator, orders_state


async def replicas_on(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    settings: RedisSettings,
    replicas: int,
    **state_settings: Any,
) -> tuple[TestClient, list[TestClient]]:
    """order_tags, the emulator and `replicas` orders_state processes on this Redis (or
    cluster): the emulator's client and each orders_state's."""
    tags_server = await aiohttp_server(
        create_order_tags(OrderTagsSettings(port=0, service_token=TEST_TOKEN, redis=settings))
    )
    emulator_server = await aiohttp_server(create_emulator(emulator_settings(tags_server)))
    # subscribing to a fresh cluster's shards can take longer than the 0.5 s default on a
    # loaded machine: no test here means a slow subscription
    waiting = {"subscribe_deadline_s": 5.0, **state_settings.pop("waiting", {})}
    values = {"waiting": waiting, **state_settings}
    protocol = PROTOCOL.model_copy(update=values.pop("protocol", {}))
    orders_state = OrdersStateSettings(
        **bff_kwargs(tags_server, emulator_server, protocol), redis=settings, **values
    )
    return (
        await aiohttp_client(emulator_server),
        [await aiohttp_client(create_orders_state(orders_state)) for _ in range(replicas)],
    )


TAXI_FIELDS = [f for r in POLICY.services["taxi"].rules if r.tag_defined for f in r.fields]


def cut(doc: dict[str, Any]) -> dict[str, Any]:
    return {name: doc[name] for name in TAXI_FIELDS if name in doc}


def env_names(settings_class: type[BaseSettings]) -> set[str]:
    """Every environment variable a settings class reads, nested settings included."""
    return {name for name, _ in operator_variables(settings_class)}


def stored_parts(redis_sync: redis.Redis, key: str) -> dict[str, str]:
    """An order's content tags as stored, without the time its first tag was written."""
    stored: dict[str, str] = redis_sync.hgetall(key)
    stored.pop("_created", None)
    stored.pop("_owner", None)
    stored.pop("_made", None)
    return stored


def cluster_settings(cluster: EmbeddedRedisCluster) -> RedisSettings:
    """The services' settings for a test cluster: generous sockets, since a loaded CI run saw
    a shard's pub/sub connection time out at the 0.2 s default and a poll meanwhile answer at
    once (`unavailable`)."""
    return RedisSettings(
        cluster_nodes=cluster.startup_nodes,
        command_deadline_s=2.0,
        socket_timeout_s=1.0,
        connect_timeout_s=1.0,
    )


def cluster_client(cluster: EmbeddedRedisCluster) -> redis.RedisCluster:
    return redis.RedisCluster.from_url(
        f"redis://{cluster.startup_nodes.split(',')[0]}", decode_responses=True
    )


class ClusterTags:
    """`hgetall` over the cluster, for `all_tags`."""

    def __init__(self, client: redis.RedisCluster) -> None:
        self.client = client

    def hgetall(self, key: str) -> dict[str, str]:
        stored: dict[str, str] = self.client.hgetall(key)
        return stored


async def one_order_per_shard(
    emulator: TestClient, sync: redis.RedisCluster, masters: int, prefix: str
) -> dict[str, tuple[str, str]]:
    """shard → (user, orderid): a driving taxi order of a user of its own on each master."""
    by_shard: dict[str, tuple[str, str]] = {}
    for attempt in range(200):
        if len(by_shard) == masters:
            break
        user = f"{prefix}-{attempt}"
        orderid = await create_order_id(emulator, user, status="driving")
        node = sync.get_node_from_key(tags_key("taxi", orderid))
        by_shard.setdefault(node.name, (user, orderid))
    assert len(by_shard) == masters
    return by_shard


def known_as_answered(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The known orders of a client that holds everything the answer gave it."""
    return [{k: o[k] for k in ("orderid", "service", "status", "tags")} for o in answer["orders"]]


async def answers_kept(client: TestClient) -> None:
    """Until the source answers the last poll is keeping are written."""
    await client.server.app[ENGINE].listings.drain()

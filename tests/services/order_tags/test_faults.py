"""Redis dies or hangs under a running order_tags: fast 503s, then recovery without a restart."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient

from services.order_tags.app import create_app
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from tests.services.order_tags.conftest import AUTH, order_tags_settings

DEADLINE_S = 0.1
# generous: this checks "no hang", not speed
HANG_LIMIT_S = 2.0

GET = {"orders": [{"service": "taxi", "orderid": "fault"}]}
SET = {"service": "taxi", "orderid": "fault", "tags": {"fast_info": "v1"}}


@pytest.fixture
async def client(
    aiohttp_client: Callable[..., Awaitable[TestClient]], own_redis: EmbeddedRedis
) -> TestClient:
    settings = order_tags_settings(RedisSettings(url=own_redis.url, command_deadline_s=DEADLINE_S))
    return await aiohttp_client(create_app(settings))


async def timed_post(client: TestClient, path: str, body: object) -> tuple[int, dict, float]:
    started = time.monotonic()
    resp = await client.post(path, json=body, headers=AUTH)
    return resp.status, await resp.json(), time.monotonic() - started


async def test_killed_redis_gives_fast_503_then_recovers(
    client: TestClient, own_redis: EmbeddedRedis
):
    status, _, _ = await timed_post(client, "/v1/tags/set", SET)
    assert status == 200
    # a read runs its script by digest (EVALSHA): the Redis knows it from now on
    status, _, _ = await timed_post(client, "/v1/tags/get", GET)
    assert status == 200

    own_redis.stop()
    for path, body in (("/v1/tags/get", GET), ("/v1/tags/set", SET)):
        status, error, elapsed = await timed_post(client, path, body)
        assert status == 503
        assert error["code"] == "cache_unavailable"
        assert elapsed < HANG_LIMIT_S
    assert (await client.get("/ping")).status == 503

    own_redis.start()
    status, body, _ = await timed_post(client, "/v1/tags/set", SET)
    assert status == 200 and body["tags"] == {"fast_info": "v1"}
    assert (await client.get("/ping")).status == 200
    # the restarted Redis does not know the read's script (NOSCRIPT): it is loaded again
    status, body, _ = await timed_post(client, "/v1/tags/get", GET)
    assert status == 200 and body["orders"][0]["tags"] == {"fast_info": "v1"}


async def test_paused_redis_gives_503_within_the_deadline(
    client: TestClient, own_redis: EmbeddedRedis
):
    own_redis.pause()
    try:
        status, error, elapsed = await timed_post(client, "/v1/tags/get", GET)
        assert status == 503 and error["code"] == "cache_unavailable"
        assert elapsed < HANG_LIMIT_S
    finally:
        own_redis.resume()
    status, _, _ = await timed_post(client, "/v1/tags/get", GET)
    assert status == 200

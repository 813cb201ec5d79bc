"""Redis dies or hangs under a running order_tags: fast 503s, then recovery without a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
import redis
from aiohttp.test_utils import TestClient

from services.order_tags.app import create_app
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from shared.redis import tags_key
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


@pytest.fixture
async def hedged_client(
    aiohttp_client: Callable[..., Awaitable[TestClient]], own_redis: EmbeddedRedis
) -> TestClient:
    """order_tags with the deployed deadline and hedge (100 ms, a hedge after 10 ms)."""
    redis_settings = RedisSettings(url=own_redis.url, command_deadline_s=DEADLINE_S)
    assert redis_settings.hedge_after_s == 0.01
    return await aiohttp_client(create_app(order_tags_settings(redis_settings)))


async def test_the_largest_create_is_answered_200_when_its_write_succeeds_late(
    hedged_client: TestClient, own_redis: EmbeddedRedis, unique: str
):
    """A write that succeeded is never answered 503 for its size: the largest valid create
    (100 orders of 32 parts) took 20-40 ms here unloaded, most of it this process packing
    and parsing, and its hedges (every 10 ms of what was work, not silence) sent it up to
    four times over; on a loaded machine it was answered 503 at 100 ms although every order
    was written. Here Redis stalls 100 ms (SIGSTOP, then SIGCONT) as the create is sent, and
    writes it when it resumes: the answer is a 200, and says what was written."""
    orders = [
        {"service": "taxi", "orderid": f"{unique}-{i}", "parts": [f"part_{j}" for j in range(32)]}
        for i in range(100)
    ]
    loop = asyncio.get_running_loop()
    own_redis.pause()
    loop.call_later(DEADLINE_S, own_redis.resume)
    status, body, elapsed = await timed_post(hedged_client, "/v1/tags/create", {"orders": orders})
    assert status == 200, (body, elapsed)
    assert [len(order["tags"]) for order in body["orders"]] == [32] * 100
    with redis.Redis.from_url(own_redis.url) as stored:
        written = [stored.hlen(tags_key("taxi", order["orderid"])) for order in orders]
    # the 32 parts, when the first was written, and that a create made them (the order had none)
    assert written == [34] * 100
    # whether a hedge went too is not asserted: the stall and the work together can pass the
    # scaled hedge wait (170 ms) on a machine busy with other tests (CI's four workers on two
    # cores sent one), and a hedge of a write that lands is harmless (create writes only
    # parts that are absent)

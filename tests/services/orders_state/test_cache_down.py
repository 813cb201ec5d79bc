"""The tag cache down (its Redis killed): polls still answer 200, force is ignored, the
degraded 10 s TTL applies, the interval doubles; the circuit then spares order_tags."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from tests.conftest import TEST_TOKEN
from tests.emulator_api import create_order_id
from tests.helpers import bff_kwargs, client_tag, poll


@pytest.fixture
async def own_order_tags(
    aiohttp_server: Callable[..., Awaitable[TestServer]], own_redis: EmbeddedRedis
) -> TestServer:
    settings = OrderTagsSettings(
        port=0, service_token=TEST_TOKEN, redis=RedisSettings(url=own_redis.url)
    )
    return await aiohttp_server(create_order_tags(settings))


@pytest.fixture
async def state(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    own_order_tags: TestServer,
    emulator_server: TestServer,
) -> AsyncIterator[TestClient]:
    settings = OrdersStateSettings(**bff_kwargs(own_order_tags, emulator_server))
    yield await aiohttp_client(create_orders_state(settings))


async def test_with_redis_killed_polls_answer_degraded(
    state: TestClient, emulator: TestClient, unique: str, own_redis: EmbeddedRedis
):
    orderid = await create_order_id(emulator, unique, status="driving")
    fresh = {
        p: client_tag("taxi", "v1", age_ms=0)
        for p in ("fast_info", "rarely_changed", "chat", "slow")
    }
    # tags issued during the outage follow the degraded TTL alone (those from before it are
    # spread over the TTL by order: tests/shared/protocol/test_need_request.py)
    stale9 = {p: client_tag("taxi", None, age_ms=9_000, degraded=True) for p in fresh}
    stale10 = {p: client_tag("taxi", None, age_ms=10_500, degraded=True) for p in fresh}
    known = {"orderid": orderid, "service": "taxi", "status": "driving"}
    _, _, normal_interval = await poll(state, unique, {"known_orders": [{**known, "tags": fresh}]})

    own_redis.stop()
    status, body, interval = await poll(
        state, unique, {"known_orders": [{**known, "tags": fresh, "force": True}]}
    )
    assert status == 200
    [order] = body["orders"]
    assert order["update_status"] == "actual"
    assert order["need_request"] == ["static"]  # force ignored; static has no client tag
    assert order["tags"] == fresh
    assert (normal_interval, interval) == (3000, 6000)

    _, body, _ = await poll(state, unique, {"known_orders": [{**known, "tags": stale9}]})
    assert body["orders"][0]["need_request"] == ["static"]
    _, body, _ = await poll(state, unique, {"known_orders": [{**known, "tags": stale10}]})
    assert body["orders"][0]["need_request"] == [
        "fast_info",
        "rarely_changed",
        "static",
        "chat",
        "slow",
    ]

    own_redis.start()


async def test_the_circuit_opens_and_spares_order_tags_then_recovers(
    state: TestClient,
    emulator: TestClient,
    unique: str,
    own_redis: EmbeddedRedis,
    own_order_tags: TestServer,
):
    await create_order_id(emulator, unique)
    own_redis.stop()
    for _ in range(8):
        status, _, _ = await poll(state, unique, {"supported_services": ["taxi"]})
        assert status == 200
    metrics = await (await state.get("/metrics")).text()
    assert 'mlutp_tag_cache_calls_total{outcome="circuit_open"} 3.0' in metrics
    assert "mlutp_tag_cache_circuit_open 1.0" in metrics
    # the first five reached order_tags (and failed there); the circuit kept the rest away
    async with (
        aiohttp.ClientSession() as session,
        session.get(own_order_tags.make_url("/metrics")) as resp,
    ):
        tags_metrics = await resp.text()
    assert (
        'http_requests_total{method="POST",route="/v1/tags/get",status="503"} 5.0' in tags_metrics
    )
    own_redis.start()

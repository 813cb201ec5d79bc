"""Part endpoints against a fake totw that counts its calls: behaviours the emulator does not
act out per order (a 4xx other than 404, one order slow while the others are fast)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from services.bff.config import UpstreamSettings
from services.orders_state.app import create_app
from services.orders_state.config import OrdersStateSettings
from tests.helpers import bff_kwargs, protocol_for_tests

TIMEOUT_S, DEADLINE_S = 0.2, 0.5
FAST = "/mlutp/v1/taxi/fast_info"
CALLS = web.AppKey("calls", Counter)


async def fake_totw(request: web.Request) -> web.Response:
    orderid = (await request.json())["orderid"]
    request.app[CALLS][orderid] += 1
    if orderid == "bad-request":
        return web.json_response({"code": "bad"}, status=400)
    if orderid == "slow":
        await asyncio.sleep(5)
    return web.json_response({"orderid": orderid, "status": "driving", "version": 1})


@pytest.fixture
async def fake_upstream(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> TestServer:
    app = web.Application()
    app[CALLS] = Counter()
    app.router.add_post("/3.0/taxiontheway", fake_totw)
    return await aiohttp_server(app)


@pytest.fixture
async def state(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
    fake_upstream: TestServer,
) -> TestClient:
    kwargs = bff_kwargs(
        order_tags_server,
        emulator_server,
        protocol_for_tests(part_timeout_s=TIMEOUT_S, part_deadline_s=DEADLINE_S),
    )
    kwargs["upstreams"] = UpstreamSettings(
        emulator_url=str(emulator_server.make_url("")),
        # fast_info's own upstream, the order core
        part_upstream_urls={"order_core": str(fake_upstream.make_url("/3.0/taxiontheway"))},
    )
    return await aiohttp_client(create_app(OrdersStateSettings(**kwargs)))


async def test_another_4xx_is_stale_without_a_retry(state: TestClient, fake_upstream: TestServer):
    resp = await state.post(
        FAST, json={"orders": [{"orderid": "bad-request"}]}, headers={"X-Yandex-UID": "u"}
    )
    assert (await resp.json())["orders"] == [
        {"orderid": "bad-request", "error": {"update_status": "stale"}}
    ]
    assert fake_upstream.app[CALLS]["bad-request"] == 1


async def test_a_slow_order_is_retried_once_and_does_not_hold_the_others(
    state: TestClient, fake_upstream: TestServer
):
    started = time.monotonic()
    resp = await state.post(
        FAST,
        json={"orders": [{"orderid": "a"}, {"orderid": "slow"}, {"orderid": "b"}]},
        headers={"X-Yandex-UID": "u"},
    )
    elapsed = time.monotonic() - started
    orders = (await resp.json())["orders"]
    assert [o["orderid"] for o in orders] == ["a", "slow", "b"]
    assert orders[0]["status"] == orders[2]["status"] == "driving"
    assert orders[1] == {"orderid": "slow", "error": {"update_status": "stale"}}
    assert fake_upstream.app[CALLS]["slow"] == 2  # timed out, retried once
    assert fake_upstream.app[CALLS]["a"] == 1
    # the slow one sleeps 5 s upstream; the answer came by the per-order deadline
    assert elapsed < 5

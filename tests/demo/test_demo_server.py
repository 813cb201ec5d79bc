"""The demo server's own API refuses bad input with a JSON 400 before it calls anything
(its upstream URLs here point at a closed port: a call would be a 502), and it cannot be turned
against the stack: it acts only for the demo user, keeps its paths under their prefix, keeps a
pool per kind of request, and switches faults only on a stack of its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from demo.app import create_app
from demo.config import DemoSettings
from demo.upstream import POOL_SIZE
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from tests.emulator_api import create_order_id
from tests.helpers import bff_kwargs
from tests.raw_http import raw_post

NOWHERE = "http://127.0.0.1:1"


@pytest.fixture
async def demo(aiohttp_client: Callable[..., Awaitable[TestClient]]) -> TestClient:
    settings = DemoSettings(launch_url=NOWHERE, orders_state_url=NOWHERE, emulator_url=NOWHERE)
    return await aiohttp_client(create_app(settings))


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/demo/v1/orders", b'{"service": "rocket"}'),
        ("/demo/v1/orders", b"{not json"),
        ("/demo/v1/faults", b'{"fault": "everything", "on": true}'),
        ("/demo/v1/faults", b'{"fault": "totw", "on": "yes"}'),
        ("/demo/v1/faults", b'{"fault": "tag_cache", "on": true}'),  # no Redis of its own
    ],
)
async def test_bad_input_is_a_json_400(demo: TestClient, path: str, body: bytes) -> None:
    resp = await demo.post(path, data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    error = await resp.json()
    assert error["code"] and error["message"]


async def test_a_service_that_does_not_answer_is_a_502_not_a_500(demo: TestClient) -> None:
    resp = await demo.post("/mlutp/v1/orders/state", json={})
    assert resp.status == 502
    assert (await resp.json())["code"] == "upstream_unavailable"


async def test_without_a_stack_of_its_own_the_page_is_offered_no_fault_switch(
    demo: TestClient,
) -> None:
    config = await (await demo.get("/demo/v1/config")).json()
    assert config["faults"] == []
    for fault in ("totw", "eats_source"):
        resp = await demo.post("/demo/v1/faults", json={"fault": fault, "on": True})
        assert resp.status == 400  # refused before any call (a call would be a 502)
        assert (await resp.json())["code"] == "fault_unavailable"
    page = await demo.get("/")
    assert page.status == 200
    assert '<script type="module" src="/static/page.js">' in await page.text()


async def test_with_a_stack_of_its_own_but_no_redis_of_its_own_no_tag_cache_switch(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
) -> None:
    settings = DemoSettings(
        launch_url=NOWHERE, orders_state_url=NOWHERE, emulator_url=NOWHERE, fault_switches=True
    )
    demo = await aiohttp_client(create_app(settings))
    config = await (await demo.get("/demo/v1/config")).json()
    assert config["faults"] == ["eats_source", "totw"]


@pytest.mark.parametrize(
    "path",
    [
        "/mlutp/%2e%2e/emulator/v1/faults",
        "/mlutp/v1/%2E%2E/%2e%2e/emulator/v1/faults",
        "/mlutp/./v1/orders/state",
        "/mlutp/v1//orders/state",
    ],
)
async def test_a_path_that_would_leave_the_mlutp_prefix_is_a_400(demo: TestClient, path: str):
    # written on the socket as it is: a client library would resolve the dots itself
    status, _, body = await raw_post(demo, path, b"{}", {})
    assert status == 400, body
    assert json.loads(body)["message"]


class HeldUpstream:
    """orders_state as the demo sees it: polls held until released, parts at once."""

    def __init__(self) -> None:
        self.held = 0
        self.held_changed = asyncio.Condition()
        self.release = asyncio.Event()

    async def poll(self, request: web.Request) -> web.Response:
        async with self.held_changed:
            self.held += 1
            self.held_changed.notify_all()
        await self.release.wait()
        return web.json_response({"orders": []})

    async def part(self, request: web.Request) -> web.Response:
        return web.json_response({"orders": []})


async def test_held_polls_fill_their_own_pool_and_other_requests_still_pass(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> None:
    upstream = HeldUpstream()
    app = web.Application()
    app.router.add_post("/mlutp/v1/orders/state", upstream.poll)
    app.router.add_post("/mlutp/v1/taxi/fast_info", upstream.part)
    server = await aiohttp_server(app)
    url = str(server.make_url("")).rstrip("/")
    demo = await aiohttp_client(
        create_app(DemoSettings(launch_url=url, orders_state_url=url, emulator_url=NOWHERE))
    )
    held = [
        asyncio.create_task(demo.post("/mlutp/v1/orders/state", json={})) for _ in range(POOL_SIZE)
    ]
    async with upstream.held_changed:
        await upstream.held_changed.wait_for(lambda: upstream.held == POOL_SIZE)
    # one poll more is refused at once; a part request has connections of its own
    more = await demo.post("/mlutp/v1/orders/state", json={})
    assert more.status == 503 and more.headers["Retry-After"] == "1"
    part = await demo.post("/mlutp/v1/taxi/fast_info", json={"orders": [{"orderid": "o1"}]})
    assert part.status == 200
    upstream.release.set()
    assert [(await poll).status for poll in held] == [200] * POOL_SIZE


async def test_advance_acts_only_on_the_demo_users_orders(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    emulator: TestClient,
    emulator_server: TestServer,
    unique: str,
) -> None:
    url = str(emulator_server.make_url("")).rstrip("/")
    demo = await aiohttp_client(
        create_app(
            DemoSettings(
                launch_url=NOWHERE, orders_state_url=NOWHERE, emulator_url=url, user_id=unique
            )
        )
    )
    someone_elses = await create_order_id(emulator, f"{unique}-other")
    resp = await demo.post(f"/demo/v1/orders/taxi/{someone_elses}/advance")
    assert resp.status == 404
    mine = await (await demo.post("/demo/v1/orders", json={"service": "taxi"})).json()
    resp = await demo.post(f"/demo/v1/orders/taxi/{mine['orderid']}/advance")
    assert resp.status == 200


async def test_a_poll_through_the_demo_is_revalidated_by_its_answer_tag(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
    unique: str,
) -> None:
    # the page's client (demo/static/transport.js) sends the last poll's answer_tag in the body
    # and takes a 204 for that answer: the tag must reach orders_state, the 204 the page
    orders_state = await aiohttp_server(
        create_orders_state(OrdersStateSettings(**bff_kwargs(order_tags_server, emulator_server)))
    )
    demo = await aiohttp_client(
        create_app(
            DemoSettings(
                launch_url=NOWHERE,
                orders_state_url=str(orders_state.make_url("")).rstrip("/"),
                emulator_url=str(emulator_server.make_url("")).rstrip("/"),
                user_id=unique,
            )
        )
    )
    mine = await (await demo.post("/demo/v1/orders", json={"service": "taxi"})).json()
    body = {"supported_services": ["taxi"]}
    first = await demo.post("/mlutp/v1/orders/state", json=body)
    assert first.status == 200
    held = {**body, "answer_tag": (await first.json())["answer_tag"]}
    again = await demo.post("/mlutp/v1/orders/state", json=held)
    assert again.status == 204 and await again.read() == b""
    assert "ETag" not in again.headers
    assert int(again.headers["X-Yataxi-Polling-Interval-Ms"]) > 0
    # the order moves on: the same answer_tag gets the new answer whole
    advanced = await demo.post(f"/demo/v1/orders/taxi/{mine['orderid']}/advance")
    assert advanced.status == 200
    moved = await demo.post("/mlutp/v1/orders/state", json=held)
    assert moved.status == 200
    news = await moved.json()
    assert news["answer_tag"] != held["answer_tag"]
    [order] = news["orders"]
    assert order["orderid"] == mine["orderid"] and order["status"] != mine["status"]

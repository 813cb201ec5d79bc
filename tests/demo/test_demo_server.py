"""The demo server's own API refuses bad input with a JSON 400 before it calls anything
(its upstream URLs here point at a closed port: a call would be a 502)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient

from demo.app import create_app
from demo.config import DemoSettings

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


async def test_without_a_redis_of_its_own_the_page_is_not_offered_the_tag_cache_switch(
    demo: TestClient,
) -> None:
    config = await (await demo.get("/demo/v1/config")).json()
    assert config["faults"] == ["eats_source", "totw"]
    page = await demo.get("/")
    assert page.status == 200
    assert '<script type="module" src="/static/page.js">' in await page.text()

"""A real stack for the client-facing services: Redis, order_tags and the emulator on real
ports, orders_state and launch on top. Tests drive orders through the emulator's API."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from services.bff.config import ProtocolSettings, UpstreamSettings
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.policy import load_policy
from shared.protocol.tags import encode_tag
from tests.conftest import TEST_TOKEN

POLICY = load_policy()
# the first layout of taxi parts, still served to old clients (policy file: `deprecated`)
DEPRECATED_TAXI_VERSION = POLICY.services["taxi"].deprecated[0].policy_version


def protocol_for_tests(**overrides: Any) -> ProtocolSettings:
    """No jitter: tests compare intervals exactly. Deadlines generous: a shared, noisy
    machine must not make the cache or a source look down where a test does not mean it;
    tests of deadlines set their own."""
    values: dict[str, Any] = {
        "interval_jitter": 0.0,
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


@pytest.fixture
async def orders_state(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
) -> TestClient:
    settings = OrdersStateSettings(**bff_kwargs(order_tags_server, emulator_server))
    return await aiohttp_client(create_orders_state(settings))


@pytest.fixture
async def launch(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
) -> TestClient:
    settings = LaunchSettings(**bff_kwargs(order_tags_server, emulator_server))
    return await aiohttp_client(create_launch(settings))


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

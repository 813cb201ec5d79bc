"""A real stack for the client-facing services: Redis, order_tags and the emulator on real
ports, orders_state and launch on top. Tests drive orders through the emulator's API.

One factory per service: `make_orders_state(**settings)` and `make_launch(**settings)` build
the app on this stack, with the test protocol (`tests.helpers.protocol_for_tests`) changed by
`protocol={...}` and any other setting given; `orders_state` and `launch` are the defaults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from tests.helpers import MakeApp, bff_kwargs, protocol_for_tests


def _settings_values(
    order_tags: TestServer, emulator: TestServer, settings: dict[str, Any]
) -> dict[str, Any]:
    protocol = protocol_for_tests(**settings.pop("protocol", {}))
    return {**bff_kwargs(order_tags, emulator, protocol), **settings}


@pytest.fixture
def make_orders_state(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
) -> MakeApp:
    async def make(**settings: Any) -> TestClient:
        values = _settings_values(order_tags_server, emulator_server, settings)
        return await aiohttp_client(create_orders_state(OrdersStateSettings(**values)))

    return make


@pytest.fixture
def make_launch(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
) -> MakeApp:
    async def make(**settings: Any) -> TestClient:
        values = _settings_values(order_tags_server, emulator_server, settings)
        return await aiohttp_client(create_launch(LaunchSettings(**values)))

    return make


@pytest.fixture
async def orders_state(make_orders_state: MakeApp) -> TestClient:
    return await make_orders_state()


@pytest.fixture
async def launch(make_launch: MakeApp) -> TestClient:
    return await make_launch()

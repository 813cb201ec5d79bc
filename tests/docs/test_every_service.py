"""Every service has GET /ping and GET /metrics (docs/protocol.md: Processes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient

from shared.config import RedisSettings
from tests.apps import all_apps


@pytest.mark.parametrize("name", ["order_tags", "emulator", "orders_state", "launch"])
async def test_ping_and_metrics(
    aiohttp_client: Callable[..., Awaitable[TestClient]], redis_settings: RedisSettings, name: str
):
    app = dict(all_apps(redis_settings))[name]
    client = await aiohttp_client(app)
    assert (await client.get("/ping")).status == 200
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    assert 'http_requests_total{method="GET",route="/ping",status="200"} 1.0' in await resp.text()

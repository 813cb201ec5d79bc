"""Every service has GET /ping and GET /metrics (docs/protocol.md: Processes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
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


@pytest.mark.parametrize(
    ("module", "port_variable"),
    [("services.orders_state", "ORDERS_STATE_PORT"), ("services.launch", "LAUNCH_PORT")],
)
def test_a_service_whose_port_is_taken_exits_with_a_message(module: str, port_variable: str):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "MLUTP_SERVICE_TOKEN": "t", port_variable: str(port)}
        env.pop("REDIS_URL", None)
        ran = subprocess.run(
            [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=60
        )
    assert ran.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in ran.stderr
    assert "Traceback" not in ran.stderr

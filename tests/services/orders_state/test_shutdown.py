"""Graceful shutdown: SIGTERM to a real orders_state process lets the request in flight
finish with its answer, then the process exits cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from devtools.stack import wait_for_ping
from shared.embedded_redis import free_port
from tests.conftest import TEST_TOKEN
from tests.emulator_api import create_order_id


async def test_sigterm_finishes_the_request_in_flight(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    unique: str,
    totw_received: asyncio.Event,
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "MLUTP_SERVICE_TOKEN": TEST_TOKEN,
        "ORDERS_STATE_PORT": str(port),
        "ORDER_TAGS_URL": str(order_tags_server.make_url("")),
        "EMULATOR_URL": str(emulator_server.make_url("")),
        "LOG_LEVEL": "WARNING",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.orders_state", env=env
    )
    try:
        await wait_for_ping(f"http://127.0.0.1:{port}", process, 30)
        orderid = await create_order_id(emulator, unique, status="driving")
        await emulator.post(
            "/emulator/v1/faults", json={"target": "totw", "mode": "slow", "delay_ms": 700}
        )
        async with aiohttp.ClientSession() as session:
            in_flight = asyncio.create_task(
                session.post(
                    f"http://127.0.0.1:{port}/mlutp/v1/taxi/fast_info",
                    json={"orders": [{"orderid": orderid}]},
                    headers={"X-Yandex-UID": unique},
                )
            )
            async with asyncio.timeout(10):
                await totw_received.wait()
            process.send_signal(signal.SIGTERM)
            response = await in_flight
            assert response.status == 200
            [part] = (await response.json())["orders"]
            assert part["status"] == "driving" and part["tag"]
        async with asyncio.timeout(20):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

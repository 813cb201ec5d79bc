"""Graceful shutdown: SIGTERM to a real orders_state process lets the request in flight
finish with its answer, then the process exits cleanly."""

from __future__ import annotations

import asyncio
import signal
import time

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from shared.embedded_redis import EmbeddedRedis
from tests.emulator_api import create_order_id
from tests.services.orders_state.process import orders_state_process


async def test_sigterm_finishes_the_request_in_flight(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    unique: str,
    totw_received: asyncio.Event,
) -> None:
    async with orders_state_process(order_tags_server, emulator_server) as (url, process):
        orderid = await create_order_id(emulator, unique, status="driving")
        await emulator.post(
            "/emulator/v1/faults", json={"target": "totw", "mode": "slow", "delay_ms": 700}
        )
        async with aiohttp.ClientSession() as session:
            in_flight = asyncio.create_task(
                session.post(
                    f"{url}/mlutp/v1/taxi/fast_info",
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


async def waiting_polls(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    line = next(line for line in text.splitlines() if line.startswith("mlutp_polls_waiting "))
    return float(line.split()[1])


async def test_sigterm_answers_every_waiting_poll_at_once(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    redis_server: EmbeddedRedis,
    unique: str,
) -> None:
    redis = {"REDIS_URL": redis_server.url}
    async with orders_state_process(order_tags_server, emulator_server, redis) as (url, process):
        async with aiohttp.ClientSession() as session:
            # no orders: nothing can wake these polls but the end of their wait or SIGTERM
            polls = [
                asyncio.create_task(
                    session.post(
                        f"{url}/mlutp/v1/orders/state",
                        json={"supported_services": ["taxi"], "wait_ms": 25_000},
                        headers={"X-Yandex-UID": f"{unique}-{i}"},
                    )
                )
                for i in range(3)
            ]
            async with asyncio.timeout(10):
                # another process: its gauge is the only signal there is, so read it
                while await waiting_polls(session, url) < 3:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            for response in await asyncio.gather(*polls):
                assert response.status == 200
                assert response.headers["X-Mlutp-Wait"] == "shutdown"
                assert (await response.json())["orders"] == []
            assert time.monotonic() - started < 10  # not the 25 s wait
        async with asyncio.timeout(20):
            assert await process.wait() == 0

"""Graceful shutdown: SIGTERM to a real orders_state process lets the request in flight
finish with its answer, then the process exits cleanly."""

from __future__ import annotations

import asyncio
import signal
import time

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from shared.embedded_redis import EmbeddedRedis
from tests.emulator_api import ORDER_CORE, create_order_id
from tests.services.orders_state.process import orders_state_process


async def test_sigterm_finishes_the_request_in_flight(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    unique: str,
    order_core_received: asyncio.Event,
) -> None:
    async with orders_state_process(order_tags_server, emulator_server) as (url, process):
        orderid = await create_order_id(emulator, unique, status="driving")
        await emulator.post(
            "/emulator/v1/faults", json={"target": ORDER_CORE, "mode": "slow", "delay_ms": 700}
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
                await order_core_received.wait()
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


async def test_polls_answered_shutdown_together_end_their_next_waits_apart(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    redis_server: EmbeddedRedis,
    unique: str,
) -> None:
    """A rolling deploy: one replica SIGTERMed answers its held polls `shutdown`, and they all
    come back at once to another. Their next waits must not end together a wait later (the
    sources' answers kept meanwhile would be asked again in one burst): the other replica
    holds each first poll of a client for a wait drawn from half of wait_ms up."""
    wait_ms, clients = 4000, 20
    redis = {"REDIS_URL": redis_server.url}
    async with (
        orders_state_process(order_tags_server, emulator_server, redis) as (stopping, process),
        orders_state_process(order_tags_server, emulator_server, redis) as (other, _),
        aiohttp.ClientSession() as session,
    ):

        async def client(i: int) -> float:
            """A client held on the stopping replica, then back on the other at once: how
            long its wait there lasted."""
            request = {
                # no service asked: nothing but the tag store and pub/sub can make a poll
                # answer before its wait ends (a source late on a loaded machine would)
                "json": {"supported_services": [], "wait_ms": wait_ms},
                "headers": {"X-Yandex-UID": f"{unique}-{i}"},
            }
            async with session.post(f"{stopping}/mlutp/v1/orders/state", **request) as first:
                assert first.headers["X-Mlutp-Wait"] == "shutdown"
            started = time.monotonic()
            async with session.post(f"{other}/mlutp/v1/orders/state", **request) as again:
                assert again.headers["X-Mlutp-Wait"] == "timeout"
            return time.monotonic() - started

        waits = [asyncio.create_task(client(i)) for i in range(clients)]
        async with asyncio.timeout(10):
            while await waiting_polls(session, stopping) < clients:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            lasted = await asyncio.gather(*waits)
    assert all(wait_ms / 2 / 1000 - 0.05 <= s <= wait_ms * 17 / 16 / 1000 + 1 for s in lasted)
    # a sixteenth of the wait (250 ms) is all the spread waits begun together had before
    assert max(lasted) - min(lasted) > wait_ms / 4 / 1000

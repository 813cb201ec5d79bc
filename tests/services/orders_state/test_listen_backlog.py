"""A fleet reconnecting at once (a deploy, a network blip) is queued by the kernel while the
process is busy, not dropped: with aiohttp's default backlog of 128 every connection past it
lost its handshake and waited on TCP's retransmits, seconds (the overload benchmark's 3,000
connections saw admitted polls answered 8 s late)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from devtools.stack import wait_for_ping
from shared.embedded_redis import free_port
from tests.conftest import TEST_TOKEN

FLEET = 600


def _somaxconn() -> int:
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except OSError:
        return 0


async def test_a_fleet_connecting_while_the_process_is_busy_is_queued_not_dropped(
    order_tags_server: TestServer, emulator_server: TestServer
) -> None:
    if _somaxconn() < FLEET:
        pytest.skip(f"net.core.somaxconn is below {FLEET}: the kernel caps every backlog there")
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
    connections: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        await wait_for_ping(f"http://127.0.0.1:{port}", process, 30)
        # a process that accepts nothing for a while: only the kernel's queue holds the fleet
        process.send_signal(signal.SIGSTOP)
        # bounded: past a full queue a handshake is dropped and retried at 1, 3, 7 s...
        async with asyncio.timeout(10):
            for reader, writer in await asyncio.gather(
                *(asyncio.open_connection("127.0.0.1", port) for _ in range(FLEET))
            ):
                connections.append((reader, writer))
        process.send_signal(signal.SIGCONT)
        for _, writer in connections:
            writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(30):
            status_lines = await asyncio.gather(*(reader.readline() for reader, _ in connections))
        assert all(line.startswith(b"HTTP/1.1 200") for line in status_lines)
    finally:
        for _, writer in connections:
            writer.close()
        if process.returncode is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            await process.wait()

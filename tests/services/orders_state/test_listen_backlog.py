"""A fleet reconnecting at once (a deploy, a network blip) is queued by the kernel while the
process is busy, not dropped: with aiohttp's default backlog of 128 every connection past it
lost its handshake and waited on TCP's retransmits, seconds (the overload benchmark's 3,000
connections saw admitted polls answered 8 s late)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from yarl import URL

from tests.services.orders_state.process import orders_state_process

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
    connections: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    async with orders_state_process(order_tags_server, emulator_server) as (url, process):
        port = URL(url).port
        try:
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
                status_lines = await asyncio.gather(
                    *(reader.readline() for reader, _ in connections)
                )
            assert all(line.startswith(b"HTTP/1.1 200") for line in status_lines)
        finally:
            for _, writer in connections:
                writer.close()

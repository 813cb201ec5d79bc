"""orders_state as a real process of a test's own, on a free port, in front of the test's
order_tags and emulator servers: for what only a process shows (signals, its listen queue)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping

from aiohttp.test_utils import TestServer

from devtools.stack import wait_for_ping
from shared.embedded_redis import free_port
from tests.conftest import TEST_TOKEN


@contextlib.asynccontextmanager
async def orders_state_process(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    extra_env: Mapping[str, str] = {},
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """Its URL and process, once /ping answers; killed afterwards if it is still running
    (stopped or not)."""
    port = free_port()
    env = {
        **os.environ,
        "MLUTP_SERVICE_TOKEN": TEST_TOKEN,
        "ORDERS_STATE_PORT": str(port),
        "ORDER_TAGS_URL": str(order_tags_server.make_url("")),
        "EMULATOR_URL": str(emulator_server.make_url("")),
        "LOG_LEVEL": "WARNING",
        **extra_env,
    }
    url = f"http://127.0.0.1:{port}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.orders_state", env=env
    )
    try:
        await wait_for_ping(url, process, 30)
        yield url, process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

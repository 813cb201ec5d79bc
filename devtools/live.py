"""`mlutp run --with-clients N`: a small population of reference clients on the live stack,
with a summary line every few seconds."""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp

from client.client import MlutpClient
from client.model import ClientOptions
from devtools.stack import Stack

SUMMARY_EVERY_S = 5.0


async def run_live_clients(stack: Stack, count: int, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as session:
        clients = [
            MlutpClient(
                session,
                launch_url=f"{stack.url('launch')}/4.0/launch",
                orders_state_url=stack.url("orders_state"),
                user_id=f"demo-user-{index + 1}",
                options=ClientOptions(),
            )
            for index in range(count)
        ]
        tasks = [asyncio.create_task(client.run(stop)) for client in clients]
        last_requests, last_bytes, last_at = 0, 0, time.monotonic()
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), SUMMARY_EVERY_S)
                now = time.monotonic()
                requests = sum(c.stats.requests for c in clients)
                received = sum(c.stats.bytes_received for c in clients)
                views = [v for c in clients for v in c.view()]
                elapsed = max(now - last_at, 1e-9)
                print(
                    f"clients {count}  orders {len(views)}  "
                    f"stale {sum(v.update_status == 'stale' for v in views)}  "
                    f"locked {sum(v.locked for v in views)}  "
                    f"req/s {(requests - last_requests) / elapsed:.1f}  "
                    f"KiB/s {(received - last_bytes) / elapsed / 1024:.1f}  "
                    f"errors {sum(c.stats.errors for c in clients)}",
                    flush=True,
                )
                last_requests, last_bytes, last_at = requests, received, now
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

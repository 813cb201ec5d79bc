"""Benchmark: orders_state under many slow clients, each trickling a request's headers one
byte at a time, with the request read timeout (the default) and without it, side by side in
one run. Reports the server's RSS before, at its peak and after, and how many connections it
closed itself.

    python benchmarks/slow_clients.py [--connections 18000] [--seconds 20]

(One process may hold at most `ulimit -Hn` descriptors: 20,000 here, so 18,000 by default.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.bench_stack import upstream_stack, wait_http
from devtools.serve import serve_args
from shared.embedded_redis import free_port

HEAD = b"POST /mlutp/v1/orders/state HTTP/1.1\r\nHost: x\r\nX-Slow: "


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def slow_client(port: int, stop_at: float, every_s: float, closed: list[int]) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(HEAD)
        while time.monotonic() < stop_at:
            try:
                # the server's answer or its close ends the wait early
                await asyncio.wait_for(reader.read(1024), every_s)
                closed[0] += 1
                return
            except TimeoutError:
                writer.write(b"a")  # one more byte of a header that never ends
    except OSError:
        closed[0] += 1
    finally:
        writer.close()


async def trickle(port: int, pid: int, connections: int, seconds: float) -> tuple[float, int]:
    """Peak RSS (MB) while `connections` slow clients trickle, and how many the server closed."""
    closed = [0]
    stop_at = time.monotonic() + seconds
    tasks = []
    for _ in range(connections):
        tasks.append(asyncio.create_task(slow_client(port, stop_at, 2.0, closed)))
        if len(tasks) % 500 == 0:
            await asyncio.sleep(0)  # let the connections open as they go
    peak = rss_mb(pid)
    while time.monotonic() < stop_at:
        await asyncio.sleep(0.5)
        peak = max(peak, rss_mb(pid))
    await asyncio.gather(*tasks)
    return peak, closed[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--connections", type=int, default=18_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    with upstream_stack(cpu=1) as stack:
        servers = {}
        for name, timeout in (("read timeout 5 s", 5), ("no read timeout", 0)):
            port = free_port()
            stack.env["ORDERS_STATE_PORT"] = str(port)
            serve = serve_args("services.orders_state", {"request_read_timeout_s": timeout})
            stack.start(serve, 0, f"http://127.0.0.1:{port}/ping")
            servers[name] = (port, stack.processes[-1].pid)
        for name, (port, pid) in servers.items():
            before = rss_mb(pid)
            peak, closed = asyncio.run(trickle(port, pid, args.connections, args.seconds))
            wait_http(f"http://127.0.0.1:{port}/ping")
            print(
                f"{name:18s} RSS before {before:6.1f} MB  peak {peak:6.1f} MB  "
                f"after {rss_mb(pid):6.1f} MB  closed by the server "
                f"{closed}/{args.connections}"
            )


if __name__ == "__main__":
    main()

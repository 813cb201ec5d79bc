"""What the access log costs a request, side by side in one run: a service's `GET /ping`
served at LOG_LEVEL=ERROR (no access log), at INFO writing every request
(LOG_ACCESS_SAMPLE=1), and at INFO with the default sample (0.01: errors and slow requests
always, a hundredth of the rest). The server is a process of its own; its CPU per request is
read from /proc before and after a fixed number of requests, and printed with the ratio to
ERROR's.

    .venv/bin/python benchmarks/access_log.py [--requests 20000] [--concurrency 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from shared.embedded_redis import free_port

ROOT = Path(__file__).resolve().parents[1]
# a base service (every service's middleware, /ping and /metrics), its logs to /dev/null
SERVER = """
import sys
from aiohttp import web
from shared.config import ServiceSettings
from shared.logs import setup_logging
from shared.web import create_base_app
settings = ServiceSettings(port=int(sys.argv[1]))
setup_logging("bench", settings.log_level, settings.log_json)
web.run_app(create_base_app("bench", settings), host="127.0.0.1", port=settings.port,
            print=None, access_log=None)
"""


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(url: str, requests: int, concurrency: int) -> None:
    async with aiohttp.ClientSession() as session:
        left = requests

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.get(url) as resp:
                    await resp.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def until_up(url: str, deadline_s: float = 20) -> None:
    started = time.monotonic()
    async with aiohttp.ClientSession() as session:
        while time.monotonic() - started < deadline_s:
            try:
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    raise RuntimeError("the server did not come up")


def measure(env: dict[str, str], requests: int, concurrency: int) -> float:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port)],
        cwd=ROOT,
        env={**os.environ, **env},
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/ping"
        asyncio.run(until_up(url))
        asyncio.run(load(url, 500, concurrency))  # warm up
        before = cpu_s(process.pid)
        asyncio.run(load(url, requests, concurrency))
        return (cpu_s(process.pid) - before) / requests
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args()
    cases = {
        "ERROR (no access log)": {"LOG_LEVEL": "ERROR"},
        "INFO, every request": {"LOG_LEVEL": "INFO", "LOG_ACCESS_SAMPLE": "1"},
        "INFO, default sample 0.01": {"LOG_LEVEL": "INFO"},
    }
    results = {name: measure(env, args.requests, args.concurrency) for name, env in cases.items()}
    base = results["ERROR (no access log)"]
    print(f"GET /ping, {args.requests} requests, {args.concurrency} at a time; server CPU:")
    for name, per_request in results.items():
        print(f"  {name:28} {per_request * 1e6:7.1f} µs/request  ({per_request / base:.2f}x)")


if __name__ == "__main__":
    main()

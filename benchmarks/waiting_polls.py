"""Benchmark: many waiting polls held by one orders_state process, then woken by tag writes.

A whole stack of its own (embedded Redis, order_tags, the emulator with its driver off,
one orders_state). N users get one driving order each; each user holds a waiting poll
(wait_ms 25000) with tags of everything as stored, so no poll has news. Measured side by
side in one run: orders_state's RSS and CPU with no poll held, then with all N held (the
ratio is what holding costs); then W orders are changed through order_tags (a bump of
fast_info) and the time from each write to its poll's answer is reported (p50/p99).

    python benchmarks/waiting_polls.py [--polls 10000] [--wake 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import psutil
import redis.asyncio as aioredis
import uvloop

from devtools.stack import Stack, free_ports_env
from shared.policy import load_policy
from shared.protocol.tags import encode_tag
from shared.redis import tags_key

POLICY = load_policy()
TAG_DEFINED = ["fast_info", "rarely_changed", "static", "chat", "slow"]
IDLE_S = 5.0


def process_of(stack: Stack, name: str) -> psutil.Process:
    pid = next(p.pid for s, p in stack.processes if s.name == name)
    return psutil.Process(pid)


async def cpu_while(process: psutil.Process, seconds: float) -> float:
    """CPU seconds per second the process burns over `seconds` of wall time."""
    before = process.cpu_times()
    await asyncio.sleep(seconds)  # measuring a rate over wall time: a sleep is the point
    after = process.cpu_times()
    used: float = after.user + after.system - before.user - before.system
    return used / seconds


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(polls: int, wake: int) -> None:
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": "ERROR", "MLUTP_MAX_WAITING": "20000"}
    env["EMULATOR_DRIVER_ENABLED"] = "false"
    stack = Stack(env)
    await stack.start()
    try:
        emulator, state = stack.url("emulator"), stack.url("orders_state")
        redis = aioredis.Redis.from_url(stack.env["REDIS_URL"], decode_responses=True)
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            limit = asyncio.Semaphore(100)

            async def create(index: int) -> tuple[str, str]:
                user = f"bench-{index}"
                async with (
                    limit,
                    session.post(
                        f"{emulator}/emulator/v1/orders",
                        json={"user_id": user, "service": "taxi", "status": "driving"},
                    ) as response,
                ):
                    return user, (await response.json())["orderid"]

            orders = await asyncio.gather(*(create(i) for i in range(polls)))
            version = POLICY.version("taxi")
            now = int(time.time() * 1000) - 60_000

            async def known(orderid: str) -> dict[str, object]:
                async with limit:
                    stored = cast(dict[str, str], await redis.hgetall(tags_key("taxi", orderid)))
                tags = {p: encode_tag(version, stored.get(p), now) for p in TAG_DEFINED}
                return {"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}

            bodies = await asyncio.gather(*(known(orderid) for _, orderid in orders))
            process = process_of(stack, "orders_state")
            rss_idle = process.memory_info().rss
            cpu_idle = await cpu_while(process, IDLE_S)

            answered_at: dict[str, float] = {}
            causes: dict[str, int] = {}

            async def hold(user: str, orderid: str, body: dict[str, object]) -> None:
                async with session.post(
                    f"{state}/mlutp/v1/orders/state",
                    json={"known_orders": [body], "wait_ms": 25_000},
                    headers={"X-Yandex-UID": user},
                ) as response:
                    await response.read()
                    answered_at[orderid] = time.perf_counter()
                    causes[response.headers.get("X-Mlutp-Wait", "")] = (
                        causes.get(response.headers.get("X-Mlutp-Wait", ""), 0) + 1
                    )

            async def waiting_now() -> float:
                async with session.get(f"{state}/metrics") as response:
                    text = await response.text()
                line = next(x for x in text.splitlines() if x.startswith("mlutp_polls_waiting "))
                return float(line.split()[1])

            # polls arrive in batches, as apps do over time, not all in one instant
            held: list[asyncio.Task[None]] = []
            pairs = list(zip(orders, bodies, strict=True))
            for start in range(0, polls, 250):
                for (user, orderid), body in pairs[start : start + 250]:
                    held.append(asyncio.create_task(hold(user, orderid, body)))
                # held: the server's own gauge says how many wait (another process: read it)
                while await waiting_now() < len(held):
                    if causes:
                        raise SystemExit(f"polls answered instead of held: {causes}")
                    await asyncio.sleep(0.1)
            rss_held = process.memory_info().rss
            cpu_held = await cpu_while(process, IDLE_S)

            written_at: dict[str, float] = {}
            token = stack.env["MLUTP_SERVICE_TOKEN"]
            for _, orderid in orders[:wake]:
                written_at[orderid] = time.perf_counter()
                async with session.post(
                    f"{stack.env['ORDER_TAGS_URL']}/v1/tags/bump",
                    json={"service": "taxi", "orderid": orderid, "parts": ["fast_info"]},
                    headers={"Authorization": f"Bearer {token}"},
                ) as response:
                    assert response.status == 200
            await asyncio.gather(*held[:wake])
            delays = [(answered_at[o] - written_at[o]) * 1000 for o in written_at]
            print(f"answers of the woken polls by X-Mlutp-Wait: {causes}")
            for task in held[wake:]:
                task.cancel()
            await asyncio.gather(*held[wake:], return_exceptions=True)
        await redis.aclose()
        mb = 1024 * 1024
        print(f"polls held: {polls}; woken by tag writes: {wake}")
        print(
            f"orders_state RSS: idle {rss_idle / mb:.0f} MB, holding {rss_held / mb:.0f} MB "
            f"(ratio {rss_held / rss_idle:.2f}; {(rss_held - rss_idle) / polls / 1024:.1f} KB "
            f"per held poll)"
        )
        print(
            f"orders_state CPU: idle {cpu_idle * 100:.1f} %, holding {cpu_held * 100:.1f} % "
            f"of one core"
        )
        print(
            f"write-to-answer ms: p50 {percentile(delays, 0.5):.1f}, "
            f"p99 {percentile(delays, 0.99):.1f}, max {max(delays):.1f}"
        )
    finally:
        await stack.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--polls", type=int, default=10_000)
    parser.add_argument("--wake", type=int, default=1_000)
    args = parser.parse_args()
    uvloop.run(main(args.polls, args.wake))

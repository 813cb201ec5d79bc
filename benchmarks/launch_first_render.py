"""Benchmark: app start to a complete first render of every order, launch with extended order
info against plain launch, side by side in one run (docs/protocol.md: Extended order info).

A whole stack of its own (embedded Redis, order_tags, the emulator with its driver off,
orders_state, launch). N users each get a driving taxi order and a cooking eats order. Each
user's app starts twice, alternating which way goes first:
- plain: POST /4.0/launch, then the required parts of every order (fast_info, full_info) from
  their part endpoints, in parallel; the first frame needs them;
- extended: POST /4.0/launch with "supported": ["extended_order_info"]; the answer holds them.
Reports the time to the first complete frame (p50/p95, and the ratio), and the heavy upstream
calls (totw, eats details) per app start from the emulator's counts.

    python benchmarks/launch_first_render.py [--users 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import uvloop

from benchmarks.loadgen import percentile
from devtools.loadtest import HEAVY_TARGETS
from devtools.stack import free_ports_env, own_stack

LAUNCH_BODY = {"supported_services": ["taxi", "eats"]}


async def heavy_calls(session: aiohttp.ClientSession, emulator: str) -> int:
    async with session.get(f"{emulator}/emulator/v1/stats") as response:
        calls = (await response.json())["calls"]
    return sum(calls.get(target, 0) for target in HEAVY_TARGETS)


async def post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], user: str
) -> dict[str, Any]:
    async with session.post(url, json=body, headers={"X-Yandex-UID": user}) as response:
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
        return answer


async def plain_start(session: aiohttp.ClientSession, launch: str, state: str, user: str) -> float:
    started = time.perf_counter()
    answer = (await post(session, launch, LAUNCH_BODY, user))["mlutp_orders_state"]
    required = {
        (rule["service"], rule["part_name"]): rule["url"]
        for rule in answer["polling_policy"]
        if rule.get("required")
    }
    fetches = [
        post(session, f"{state}{url}", {"orders": [{"orderid": order["orderid"]}]}, user)
        for order in answer["orders"]
        for (service, part), url in required.items()
        if service == order["service"] and part in order["need_request"]
    ]
    await asyncio.gather(*fetches)
    return time.perf_counter() - started


async def extended_start(session: aiohttp.ClientSession, launch: str, user: str) -> float:
    started = time.perf_counter()
    answer = await post(
        session, launch, {**LAUNCH_BODY, "supported": ["extended_order_info"]}, user
    )
    orders = answer["mlutp_orders_state"]["orders"]
    assert all("parts" in order for order in orders), "a required part did not come inline"
    return time.perf_counter() - started


async def main(users: int) -> None:
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": "ERROR"}
    env["EMULATOR_DRIVER_ENABLED"] = "false"
    async with own_stack(env) as stack:
        emulator, state = stack.url("emulator"), stack.url("orders_state")
        launch = f"{stack.url('launch')}/4.0/launch"
        async with aiohttp.ClientSession() as session:
            names = [f"render-{index}" for index in range(users)]
            for user in names:
                for service, status in (("taxi", "driving"), ("eats", "cooking")):
                    async with session.post(
                        f"{emulator}/emulator/v1/orders",
                        json={"user_id": user, "service": service, "status": status},
                    ) as response:
                        assert response.status == 200
            times: dict[str, list[float]] = {"plain": [], "extended": []}
            calls: dict[str, int] = {"plain": 0, "extended": 0}
            for index, user in enumerate(names):
                order = ("plain", "extended") if index % 2 == 0 else ("extended", "plain")
                for way in order:
                    before = await heavy_calls(session, emulator)
                    if way == "plain":
                        times[way].append(await plain_start(session, launch, state, user))
                    else:
                        times[way].append(await extended_start(session, launch, user))
                    calls[way] += await heavy_calls(session, emulator) - before
        for way, values in times.items():
            print(
                f"{way:>9}: first complete frame p50 {percentile(values, 0.5) * 1000:.1f} ms, "
                f"p95 {percentile(values, 0.95) * 1000:.1f} ms; heavy upstream calls per app "
                f"start {calls[way] / users:.2f}"
            )
        ratio = percentile(times["extended"], 0.5) / percentile(times["plain"], 0.5)
        print(f"extended / plain, p50 time to the first frame: {ratio:.2f}")
        print(f"extended / plain, heavy calls per start: {calls['extended'] / calls['plain']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=200)
    args = parser.parse_args()
    uvloop.run(main(args.users))

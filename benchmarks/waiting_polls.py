"""Benchmark: many waiting polls held by one orders_state process, then woken by tag writes.

A whole stack of its own (embedded Redis, order_tags, the emulator with its driver off,
one orders_state). N users get one driving order each; each user holds a waiting poll
(wait_ms 25000) with tags of everything as stored, so no poll has news. The polls arrive at a
steady rate and, like the reference client, poll again at once after a `timeout` and at the
interval after `unavailable`. Measured side by
side in one run: orders_state's RSS and CPU with no poll held, then with all N held (the
ratio is what holding costs); then W orders are changed through order_tags (a bump of
fast_info) and the time from each write to its poll's answer is reported (p50/p99).

    python benchmarks/waiting_polls.py [--polls 10000] [--wake 1000] [--rate 600]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import psutil
import redis.asyncio as aioredis
import uvloop

from benchmarks.loadgen import percentile
from benchmarks.users import caught_up_users
from devtools.stack import Stack, free_ports_env, own_stack
from services.bff.wire import INTERVAL_HEADER

IDLE_S = 3.0
# how long after the last poll arrived the server may take to hold them all
RAMP_GRACE_S = 30.0


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


async def main(polls: int, wake: int, rate: float) -> None:
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": "ERROR", "MLUTP_MAX_WAITING": "20000"}
    env["EMULATOR_DRIVER_ENABLED"] = "false"
    async with own_stack(env) as stack:
        emulator, state = stack.url("emulator"), stack.url("orders_state")
        redis = aioredis.Redis.from_url(stack.env["REDIS_URL"], decode_responses=True)
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            orders, bodies = await caught_up_users(session, emulator, redis, polls, "bench")
            process = process_of(stack, "orders_state")
            rss_idle = process.memory_info().rss
            cpu_idle = await cpu_while(process, IDLE_S)

            answered_at: dict[str, float] = {}
            causes: Counter[str] = Counter()
            resting = 0  # clients between an answer that could not wait and their next poll

            async def hold(user: str, orderid: str, body: dict[str, object]) -> None:
                """A waiting client: polls again at once after `timeout`, after the interval
                when the server could not hold it; done when its change comes back."""
                while True:
                    async with session.post(
                        f"{state}/mlutp/v1/orders/state",
                        json={"known_orders": [body], "wait_ms": 25_000},
                        headers={"X-Yandex-UID": user},
                    ) as response:
                        await response.read()
                        cause = response.headers.get("X-Mlutp-Wait", "")
                    causes[cause] += 1
                    if cause in ("wakeup", "news"):
                        answered_at[orderid] = time.perf_counter()
                        return
                    if cause in ("unavailable", "shed"):
                        # the client's interval: the server said it could not hold the poll
                        nonlocal resting
                        resting += 1
                        await asyncio.sleep(float(response.headers[INTERVAL_HEADER]) / 1000)
                        resting -= 1

            async def waiting_now() -> float:
                async with session.get(f"{state}/metrics") as response:
                    text = await response.text()
                line = next(x for x in text.splitlines() if x.startswith("mlutp_polls_waiting "))
                return float(line.split()[1])

            # polls arrive one by one at a steady rate, as apps' do, not in bursts: a burst
            # queues behind the process's own event loop past the tag cache's 50 ms deadline
            held: list[asyncio.Task[None]] = []
            loop = asyncio.get_running_loop()
            ramp_started = time.perf_counter()
            next_at = loop.time()
            for (user, orderid), body in zip(orders, bodies, strict=True):
                held.append(asyncio.create_task(hold(user, orderid, body)))
                next_at += 1 / rate
                await asyncio.sleep(max(0.0, next_at - loop.time()))  # pacing the arrivals
            # then until the server holds every poll not resting between polls; the gauge is
            # another process's, so there is no event to await: it is read again. Bounded: a
            # server that cannot hold them all (the tag cache's circuit open under the ramp,
            # say) ends the run with what it answered
            ramp_deadline = loop.time() + RAMP_GRACE_S
            while await waiting_now() < len(held) - resting:
                if loop.time() > ramp_deadline:
                    for task in held:
                        task.cancel()
                    await asyncio.gather(*held, return_exceptions=True)
                    raise SystemExit(
                        f"orders_state did not hold {polls} polls {RAMP_GRACE_S:.0f} s after the "
                        f"last arrived; answers by X-Mlutp-Wait: {dict(causes)}"
                    )
                await asyncio.sleep(0.1)
            ramp_s = time.perf_counter() - ramp_started
            ramp_causes = dict(causes)
            causes.clear()
            rss_held = process.memory_info().rss
            cpu_held = await cpu_while(process, IDLE_S)
            # polls answered in the CPU window (a timeout's next poll costs CPU, holding not)
            answered_in_window = sum(causes.values())

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
            print(f"answers while the polls were being held, by X-Mlutp-Wait: {ramp_causes}")
            print(f"answers from then on (holding, then woken): {dict(causes)}")
            for task in held[wake:]:
                task.cancel()
            await asyncio.gather(*held[wake:], return_exceptions=True)
        await redis.aclose()
        mb = 1024 * 1024
        print(
            f"polls held: {polls} (arriving at {rate}/s, all held after {ramp_s:.1f} s); "
            f"woken by tag writes: {wake}"
        )
        print(
            f"orders_state RSS: idle {rss_idle / mb:.0f} MB, holding {rss_held / mb:.0f} MB "
            f"(ratio {rss_held / rss_idle:.2f}; {(rss_held - rss_idle) / polls / 1024:.1f} KB "
            f"per held poll)"
        )
        print(
            f"orders_state CPU: idle {cpu_idle * 100:.1f} %, holding {cpu_held * 100:.1f} % "
            f"of one core ({answered_in_window} polls answered in those {IDLE_S:.0f} s)"
        )
        print(
            f"write-to-answer ms: p50 {percentile(delays, 0.5):.1f}, "
            f"p99 {percentile(delays, 0.99):.1f}, max {max(delays):.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--polls", type=int, default=10_000)
    parser.add_argument("--wake", type=int, default=1_000)
    parser.add_argument("--rate", type=float, default=600, help="polls arriving per second")
    args = parser.parse_args()
    uvloop.run(main(args.polls, args.wake, args.rate))

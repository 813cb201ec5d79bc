"""Benchmark: what one request of each kind costs, for the capacity model (docs/capacity.md).

A stack of its own (embedded Redis, order_tags, the emulator with its driver off, one
orders_state). U users get one driving taxi order each. Then, one kind after the other, a
fixed number of requests at a fixed concurrency, each measured by the CPU time the processes
used (psutil; Redis by its own INFO), Redis's commands and network bytes, and the bytes of
the answers:

- poll: orders/state of a superapp client (taxi, eats and grocery queried) with the order known
  and every tag current (no news), wait_ms 0;
- part: fast_info of one order (the recent-fetch memo off, so each is a real upstream call);
- legacy: /3.0/taxiontheway through orders_state (what the old polling cost this layer);
- waiting: orders/state with wait_ms 1000 and no news, answered at its wait's end (a waiting
  poll's look, subscription and answer; holding itself costs next to nothing); each user
  polls again at once when answered, `--waits` times (20), as a waiting client does (and,
  like one, waits the answer's interval first after a poll that could not be held:
  `unavailable` or `shed`);
- paced: plain polls (wait_ms 0) at the waiting polls' rate, each user's a second apart: what
  the wait itself adds, beside the rate;
- re-ask: the first poll of as many new users, which have no kept source answer: each of the
  three sources is asked and its answer kept (what a poll costs when its kept answers are
  older than `list_max_age`, or its list changed).

Then, side by side, the CPU, Redis commands and bytes of one active order for a minute under
each scheme, at the rates `mlutp loadtest` measured (RATES, docs/capacity.md): the ratio is
the comparison; the absolute figures are this machine's. Last, the model of docs/capacity.md
(`--orders` active orders with an app each, `--idle-apps` more apps open with no order): the
requests, order source calls, heavy upstream calls and upstream work a second, and the cores
they take at this run's costs. An app with no order re-asks each source when its kept answer
has passed its own limit (0.75 to 1 of `list_max_age`) at its next poll: how often that is,
is drawn (`reask_period_s`), not measured.

    python benchmarks/capacity.py [--users 1000] [--requests 3000] [--concurrency 20] [--waits 20]
                                  [--orders 1000000] [--idle-apps 2000000] [--log-level INFO]

The services log at `--log-level`, INFO by default: what compose and the manifests deploy (the
access log then writes its sample, errors and slow requests; docs/configuration.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import psutil
import redis.asyncio as aioredis
import uvloop
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.users import POLICY, caught_up_users
from client.model import INTERVAL_HEADER, POLL_AGAIN_AT_ONCE, WAIT_HEADER
from devtools.stack import STACK, Stack, free_ports_env, own_stack
from services.bff.config import ProtocolSettings
from shared.protocol.list_tags import KEPT_AGE_SPREAD_FROM
from shared.redis import tags_key

PROCESSES = ("orders_state", "order_tags", "emulator")
# what a superapp client queries on every poll (docs/capacity.md: 3M superapp clients)
SUPERAPP = ["taxi", "eats", "grocery"]
# per active order and minute (per client-minute: one active order a client), from `mlutp
# loadtest --clients 500 --duration 180 --warmup 150 --start-spread 120 --created-elsewhere
# 0.3`, 2026-11-25, at commit 4d29873 (its services at their defaults: list_max_age 120 s, each
# kept answer's limit drawn in [0.75, 1] of it; docs/loadtest-results.md): each phase's
# requests over its client-minutes; "part" is every request but polls (parts, route, launch);
# "re-ask" is the polls that asked the sources again (src/cl-min, SOURCE_CALLS, over the three
# services a poll queries), costed as what they add to a poll. Its waiting phase ran healthy;
# its plain phase did not (a loaded machine: 503s, the tag store unavailable, every source
# asked), so plain polling's rates are the run at list_max_age 30 s but for source calls,
# an estimate: the waiting phase's changed lists (0.27) and its re-asks past the age (1.44,
# every 116 s) at a plain client's every ~108 s (its polls 2-5 s apart). Legacy's are the run
# at 30 s too (no list tags in it). The run at 30 s: source calls 5.56 and 4.17.
SOURCE_CALLS = {"mlutp": 1.9, "mlutp_wait": 1.77}
RATES = {
    "legacy": {"legacy": 9.09},
    "mlutp": {"poll": 13.74, "part": 1.66, "re-ask": SOURCE_CALLS["mlutp"] / 3},
    "mlutp_wait": {"waiting": 3.07, "part": 1.46, "re-ask": SOURCE_CALLS["mlutp_wait"] / 3},
}
# heavy upstream calls (totw, eats and grocery details) per active order-minute, the same runs
HEAVY_CALLS = {"legacy": 8.87, "mlutp": 1.27, "mlutp_wait": 1.19}
# upstream work (emulator/work.py: the priced fields the part upstreams, totw and the details
# built) per active order-minute, beside the calls: once each taxi part comes from its own
# service a call is no unit of cost. From `mlutp loadtest --clients 100 --duration 60 --warmup
# 30 --start-spread 20`, 2026-11-28, at the part services' commit (a short run on a shared
# machine; docs/loadtest-results.md: Upstream work)
UPSTREAM_WORK = {"legacy": 833.0, "mlutp": 51.0, "mlutp_wait": 65.0}
# an app with no active order polls every 30 s ±10 % (the protocol's interval with no orders,
# its jitter); waiting, its poll is held 25 s (wait_ms) plus up to 1/16 of it, and it polls
# again at once
IDLE_POLL_S = {"mlutp": (27.0, 33.0), "mlutp_wait": (25.0, 25.0 * 17 / 16)}
# the request kind an app with no order's poll is costed as (an upper bound: it reads no tags)
POLL_KIND = {"mlutp": "poll", "mlutp_wait": "waiting"}


def reask_period_s(
    poll_s: tuple[float, float], max_age_s: float, draws: int = 20_000, seed: int = 1
) -> float:
    """Mean seconds between an idle app's calls to one source: a kept answer stands while
    younger than its own limit (drawn in [0.75, 1] of `list_max_age`), so the source is asked
    at the first poll (each `poll_s` apart, drawn evenly) that finds it at least that old."""
    rng = random.Random(seed)
    total = 0.0
    for _ in range(draws):
        limit = max_age_s * rng.uniform(KEPT_AGE_SPREAD_FROM, 1.0)
        age = 0.0
        while age < limit:
            age += rng.uniform(*poll_s)
        total += age
    return total / draws


@dataclass
class Cost:
    requests: int
    seconds: float
    cpu_s: dict[str, float]  # per process, and "redis"
    redis_commands: float
    redis_bytes: float
    answer_bytes: float

    def per_request(self, value: float) -> float:
        return value / self.requests


async def redis_counters(client: aioredis.Redis) -> tuple[float, float, float]:
    """Redis's CPU seconds, commands processed and network bytes (in plus out)."""
    cpu = await client.info("cpu")
    stats = await client.info("stats")
    return (
        float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        float(stats["total_commands_processed"]),
        float(stats["total_net_input_bytes"]) + float(stats["total_net_output_bytes"]),
    )


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def measure(
    stack: Stack,
    redis: aioredis.Redis,
    requests: int,
    concurrency: int,
    send: Callable[[int], Awaitable[int]],
    *,
    spread_s: float = 0.0,
) -> Cost:
    """`requests` calls of `send(i)` (it returns the answer's bytes), `concurrency` at once;
    with `spread_s`, the workers start spread evenly over that time (clients do not start in
    step), and the time before the last one started is measured too."""
    processes = {s.name: psutil.Process(p.pid) for s, p in stack.processes if s.name in PROCESSES}
    cpu0 = {name: cpu_seconds(p) for name, p in processes.items()}
    redis0 = await redis_counters(redis)
    answer_bytes = 0
    turn = iter(range(requests))

    async def worker(number: int) -> None:
        nonlocal answer_bytes
        if spread_s:
            # a timer by nature: the worker's place in the spread
            await asyncio.sleep(spread_s * number / concurrency)
        for index in turn:
            # awaited first: `+= await` would read the total before the wait and lose the
            # other workers' additions
            size = await send(index)
            answer_bytes += size

    started = time.perf_counter()
    await asyncio.gather(*(worker(number) for number in range(concurrency)))
    seconds = time.perf_counter() - started
    redis1 = await redis_counters(redis)
    cpu = {name: cpu_seconds(p) - cpu0[name] for name, p in processes.items()}
    cpu["redis"] = redis1[0] - redis0[0]
    return Cost(requests, seconds, cpu, redis1[1] - redis0[1], redis1[2] - redis0[2], answer_bytes)


async def main(
    users: int,
    requests: int,
    concurrency: int,
    waits: int,
    model_orders: int,
    idle_apps: int,
    log_level: str,
) -> None:
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": log_level}
    env |= {"EMULATOR_DRIVER_ENABLED": "false"}
    protocol = {
        "part_fetches": {"recent_memo_bytes": 0},
        # what a request costs, not admission control: the waiting polls come back all at
        # once each second, a burst the adaptive cap (from its floor of 20) would shed
        "admission": {"min_polls_in_flight": 2000},
        # no kept answer expires mid-run: what a re-ask costs is measured on its own
        "list_max_age_s": 300,
    }
    env.pop("REDIS_URL", None)
    services = [s for s in STACK if s.name in PROCESSES]
    settings = {"orders_state": {"protocol": protocol}, "launch": {"protocol": protocol}}
    async with own_stack(env, services, settings) as stack:
        emulator, state = stack.url("emulator"), stack.url("orders_state")
        redis = aioredis.Redis.from_url(stack.env["REDIS_URL"], decode_responses=True)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as session:
            orders, bodies = await caught_up_users(session, emulator, redis, users, "capacity")
            new_orders, new_bodies = await caught_up_users(
                session, emulator, redis, users, "capacity-new"
            )
            # what one order's tags take in Redis (its hash, key included)
            sizes = [
                await redis.memory_usage(tags_key("taxi", orderid)) or 0
                for _, orderid in orders[:50]
            ]
            key_bytes = sum(sizes) / len(sizes)
            fast_info = next(r for r in POLICY.services["taxi"].rules if r.part_name == "fast_info")

            async def post(url: str, user: str, body: dict[str, Any]) -> int:
                async with session.post(url, json=body, headers={"X-Yandex-UID": user}) as r:
                    payload = await r.read()
                    assert r.status == 200, payload
                    if body.get("wait_ms") and r.headers.get(WAIT_HEADER) not in POLL_AGAIN_AT_ONCE:
                        # a waiting poll that could not be held: a client waits the interval
                        # before its next poll; one that polled again at once spun a busy
                        # process into the ground (19,899 of 20,000 answers unavailable,
                        # each asking for another, at --users 1000)
                        interval_ms = int(r.headers[INTERVAL_HEADER])
                        # a timer by nature: the client's interval
                        await asyncio.sleep(interval_ms / 1000)
                    return len(payload)

            def poll(wait_ms: int, pause_s: float = 0.0) -> Callable[[int], Awaitable[int]]:
                async def send(index: int) -> int:
                    if pause_s:
                        # a timer by nature: a client's pause between polls
                        await asyncio.sleep(pause_s)
                    user, _ = orders[index % users]
                    body = {
                        "known_orders": [bodies[index % users]],
                        "supported_services": SUPERAPP,
                        "wait_ms": wait_ms,
                    }
                    return await post(f"{state}/mlutp/v1/orders/state", user, body)

                return send

            def reask(index: int) -> Awaitable[int]:
                user, _ = new_orders[index]
                body = {"known_orders": [new_bodies[index]], "supported_services": SUPERAPP}
                return post(f"{state}/mlutp/v1/orders/state", user, body)

            def part(index: int) -> Awaitable[int]:
                user, orderid = orders[index % users]
                body = {"orders": [{"orderid": orderid}]}
                return post(f"{state}{fast_info.url}", user, body)

            def legacy(index: int) -> Awaitable[int]:
                user, orderid = orders[index % users]
                return post(f"{state}/3.0/taxiontheway", user, {"orderid": orderid})

            async def waiting_answers() -> Counter[str]:
                """orders_state's waiting polls so far, by how each was answered."""
                async with session.get(f"{state}/metrics") as response:
                    text = await response.text()
                return Counter(
                    {
                        sample.labels["cause"]: int(sample.value)
                        for family in text_string_to_metric_families(text)
                        for sample in family.samples
                        if sample.name == "mlutp_waiting_poll_answers_total"
                    }
                )

            # warm-up: connections, caches, first-call imports, and each user's sources asked
            # and answers kept
            await measure(stack, redis, users, concurrency, poll(0))
            answered_before = await waiting_answers()
            costs = {
                "poll": await measure(stack, redis, requests, concurrency, poll(0)),
                "part": await measure(stack, redis, requests, concurrency, part),
                "legacy": await measure(stack, redis, requests, concurrency, legacy),
                # every user's poll waits its second, the users' starts spread over that
                # second as clients' are; each polls again as soon as answered, `waits`
                # times, as a waiting client does (its channels stay subscribed from one poll
                # to the next)
                "waiting": await measure(
                    stack, redis, users * waits, users, poll(1000), spread_s=1.0
                ),
                # plain polls at the waiting polls' rate: each user's poll a second apart, as
                # spread; beside "waiting", what the wait itself adds
                "paced": await measure(
                    stack, redis, users * waits // 2, users, poll(0, 1.0), spread_s=1.0
                ),
                "re-ask": await measure(stack, redis, users, concurrency, reask),
            }
            # only the waiting kind waits (the others have wait_ms 0 and are not counted)
            waited = await waiting_answers()
            waited.subtract(answered_before)
        await redis.aclose()

    print(
        f"{users} users, one driving taxi order each; {concurrency} requests at a time; "
        f"the services at LOG_LEVEL {log_level}"
    )
    print(f"one order's tags in Redis (MEMORY USAGE of its hash): {key_bytes:.0f} bytes")
    head = (
        f"{'request':<10}{'req/s':>9}{'orders_state ms':>17}{'order_tags ms':>15}"
        f"{'redis ms':>10}{'emulator ms':>13}{'redis cmds':>12}{'redis B':>10}{'answer B':>10}"
    )
    print(head)
    for name, cost in costs.items():
        print(
            f"{name:<10}{cost.requests / cost.seconds:>9.0f}"
            f"{cost.per_request(cost.cpu_s['orders_state']) * 1000:>17.3f}"
            f"{cost.per_request(cost.cpu_s['order_tags']) * 1000:>15.3f}"
            f"{cost.per_request(cost.cpu_s['redis']) * 1000:>10.3f}"
            f"{cost.per_request(cost.cpu_s['emulator']) * 1000:>13.3f}"
            f"{cost.per_request(cost.redis_commands):>12.2f}"
            f"{cost.per_request(cost.redis_bytes):>10.0f}"
            f"{cost.per_request(cost.answer_bytes):>10.0f}"
        )
    print(f"waiting polls answered: {dict(+waited)}")
    if waited["timeout"] < 0.99 * sum(waited.values()):
        # a poll that could not wait answered at once: its cost is not a waiting poll's
        print(
            "  WARNING: under 99 % waited to their end; the waiting row is the cost of "
            "degraded polls on this machine: run with fewer --users"
        )
    print("\none active order for a minute (the rates of RATES):")
    print(
        f"{'scheme':<12}{'orders_state ms':>16}{'order_tags ms':>15}{'redis ms':>10}"
        f"{'BFF ms':>8}{'redis cmds':>12}{'answer KB':>11}{'orders_state / legacy':>23}"
        f"{'BFF / legacy':>14}"
    )

    def extra(kind: str, of: Callable[[Cost], float]) -> float:
        """Per request; a re-ask as what it adds to a poll."""
        cost = costs[kind].per_request(of(costs[kind]))
        if kind == "re-ask":
            cost -= costs["poll"].per_request(of(costs["poll"]))
        return cost

    legacy_state = legacy_bff = 0.0
    for scheme, rates in RATES.items():

        def total(of: Callable[[Cost], float], rates: dict[str, float] = rates) -> float:
            return sum(rate * extra(kind, of) for kind, rate in rates.items())

        state_ms = total(lambda c: c.cpu_s["orders_state"]) * 1000
        tags = total(lambda c: c.cpu_s["order_tags"]) * 1000
        redis_ms = total(lambda c: c.cpu_s["redis"]) * 1000
        bff = state_ms + tags + redis_ms
        legacy_state, legacy_bff = legacy_state or state_ms, legacy_bff or bff
        print(
            f"{scheme:<12}{state_ms:>16.2f}{tags:>15.2f}{redis_ms:>10.2f}{bff:>8.2f}"
            f"{total(lambda c: c.redis_commands):>12.1f}"
            f"{total(lambda c: c.answer_bytes) / 1024:>11.1f}"
            f"{state_ms / legacy_state:>23.2f}{bff / legacy_bff:>14.2f}"
        )
    model(costs, extra, model_orders, idle_apps)


# the CPU of orders_state, order_tags and Redis in a Cost
PROCESS_CPU: list[Callable[[Cost], float]] = [
    lambda c: c.cpu_s["orders_state"],
    lambda c: c.cpu_s["order_tags"],
    lambda c: c.cpu_s["redis"],
]


def model(
    costs: dict[str, Cost],
    extra: Callable[[str, Callable[[Cost], float]], float],
    orders: int,
    idle_apps: int,
) -> None:
    """docs/capacity.md's model: `orders` active orders with an app each at RATES, and
    `idle_apps` apps with no order polling at IDLE_POLL_S, each re-asking the sources a poll
    queries when its kept answers pass their limit."""
    max_age_s = ProtocolSettings().list_max_age_s
    print(
        f"\n{orders:,} active orders (an app each) and {idle_apps:,} apps with no order, "
        f"list_max_age {max_age_s:.0f} s, a second:"
    )
    print(
        f"{'scheme':<12}{'polls':>10}{'idle polls':>12}{'re-asks':>10}{'idle re-asks':>14}"
        f"{'parts':>9}{'heavy':>9}{'work':>12}{'source calls':>14}{'of idle apps':>14}"
        f"{'idle every':>12}"
        f"{'orders_state':>14}{'order_tags':>12}{'redis':>7}"
    )
    legacy_rate = orders * RATES["legacy"]["legacy"] / 60
    print(
        f"{'legacy':<12}{legacy_rate:>10,.0f}{'':>12}{'':>10}{'':>14}{'':>9}"
        f"{orders * HEAVY_CALLS['legacy'] / 60:>9,.0f}"
        f"{orders * UPSTREAM_WORK['legacy'] / 60:>12,.0f}{'':>14}{'':>14}{'':>12}"
        f"{legacy_rate * extra('legacy', lambda c: c.cpu_s['orders_state']):>14.1f}"
    )
    for scheme in ("mlutp", "mlutp_wait"):
        rates, kind = RATES[scheme], POLL_KIND[scheme]
        polls = orders * rates[kind] / 60
        idle_polls = idle_apps / (sum(IDLE_POLL_S[scheme]) / 2)
        period_s = reask_period_s(IDLE_POLL_S[scheme], max_age_s)
        # a re-ask is costed as asking the three sources; its count is source calls over three
        reasks = orders * SOURCE_CALLS[scheme] / 3 / 60
        idle_reasks = idle_apps / period_s
        parts = orders * rates["part"] / 60
        sources = 3 * (reasks + idle_reasks)

        # the CPU seconds a second of orders_state, order_tags and Redis
        cores = [
            (polls + idle_polls) * extra(kind, of)
            + (reasks + idle_reasks) * extra("re-ask", of)
            + parts * extra("part", of)
            for of in PROCESS_CPU
        ]
        print(
            f"{scheme:<12}{polls:>10,.0f}{idle_polls:>12,.0f}{reasks:>10,.0f}{idle_reasks:>14,.0f}"
            f"{parts:>9,.0f}{orders * HEAVY_CALLS[scheme] / 60:>9,.0f}"
            f"{orders * UPSTREAM_WORK[scheme] / 60:>12,.0f}{sources:>14,.0f}"
            f"{3 * idle_reasks:>14,.0f}{period_s:>10.0f} s"
            f"{cores[0]:>14.1f}{cores[1]:>12.1f}{cores[2]:>7.1f}"
        )
    print(
        "(cores at this machine's CPU per request; polls and re-asks of the three sources; "
        "work in the emulator's units, docs/development.md: Upstream work)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # as many waiting at once: about as many waiting polls a second
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=20)
    # a waiting client polls about 3 times a minute for as long as its order lives (minutes):
    # its first poll's subscription is a small share of its polls
    parser.add_argument("--waits", type=int, default=20, help="waiting polls per user")
    parser.add_argument("--orders", type=int, default=1_000_000, help="the model's active orders")
    parser.add_argument(
        "--idle-apps", type=int, default=2_000_000, help="the model's apps with no active order"
    )
    parser.add_argument(
        "--log-level", default="INFO", help="the services' LOG_LEVEL (INFO: as deployed)"
    )
    args = parser.parse_args()
    uvloop.run(
        main(
            args.users,
            args.requests,
            args.concurrency,
            args.waits,
            args.orders,
            args.idle_apps,
            args.log_level,
        )
    )

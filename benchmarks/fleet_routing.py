"""Benchmark: what routing by user saves a fleet while the tag store is down (issue 47).

N replicas of orders_state behind the shipped balancer (deploy/haproxy/haproxy.cfg, run by a
real haproxy), the tag store's Redis stopped (the shared part cache with it), and one user's
three devices fetching the order core's part (`fast_info`) of an order at once: a round per
order, each a fresh order (so each round is one degraded-memo window, 10 s, of its own).
Prints the order core's calls per round, side by side:

- routed: the shipped config (by X-Yandex-UID, consistent hashing, bounded at 300 %) on a
  fleet in service: other users' requests held in flight on every replica, as a fleet has;
- routed, idle: the same config with nothing else in flight, where the bound (3 times the
  average of requests in flight, which is ~0; at 150 % it sent a user's second request
  elsewhere) keeps a user's parts together on 3 replicas;
- sprayed: the same config with `balance roundrobin` instead.

One process answers the three requests with one call (coalesced; then the memo): that is the
degraded bound the fleet should keep.

    python benchmarks/fleet_routing.py [--replicas 1 2 3] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.balancer import local_config, running_haproxy
from devtools.stack import STACK, Stack, free_ports_env
from shared.embedded_redis import free_port
from shared.policy import load_policy

UID = "X-Yandex-UID"
BACKEND = "orders_state"
SPRAYED = "roundrobin"
# the other users' requests a fleet in service holds on each replica while we measure: the
# `slow` part, its upstream held this long (under the part timeout set below)
IN_SERVICE_PER_REPLICA = 20
HOLD_MS = 6000
# the slow part's upstream (the policy's own for `slow`), as the emulator names its fault
SLOW_TARGET = "part:orderperformerinfo"
# fixed names: the hash places them the same way on every run
BACKGROUND_USER = "fleet-user-{}"
USER = "routed-user"


def part_url(name: str) -> str:
    return next(r.url for r in load_policy().services["taxi"].rules if r.part_name == name)


# one user's devices asking for the same part at once
DEVICES = 3
CHANGING_PART = "fast_info"


def changing_part() -> tuple[str, str]:
    """The order core's part, which changes all through an order: its URL and its upstream."""
    rule = next(r for r in load_policy().services["taxi"].rules if r.part_name == CHANGING_PART)
    return rule.url, rule.upstream_name


def fleet_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A stack of its own (free ports, its own Redis, errors alone logged; `base` on top). The held
    requests of a fleet in service must outlast the measurement: their upstream answers in
    HOLD_MS, under one attempt's timeout."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_CLUSTER_NODES")}
    return {
        **env,
        **free_ports_env(),
        "LOG_LEVEL": "ERROR",
        **(base or {}),
        "MLUTP_PART_TIMEOUT_S": str(2 * HOLD_MS / 1000),
        "MLUTP_PART_DEADLINE_S": str(4 * HOLD_MS / 1000 + 1),
    }


def fleet(replicas: int, env: Mapping[str, str] | None = None) -> Stack:
    """Redis, order_tags, the emulator and `replicas` of orders_state."""
    names = ("order_tags", "emulator", "orders_state")
    services = [s for s in STACK if s.name in names]
    return Stack(fleet_env(env), services, replicas=replicas)


@dataclass
class Balancer:
    url: str
    balance: str | None


@contextlib.asynccontextmanager
async def balancer(stack: Stack, balance: str | None = None) -> AsyncIterator[Balancer]:
    """The shipped config in front of the stack's orders_state replicas (`balance`: a line
    of its own instead of the shipped one)."""
    port = free_port()
    config = local_config(
        {BACKEND: stack.urls(BACKEND)},
        {BACKEND: port},
        balance={BACKEND: balance} if balance else None,
    )
    url = f"http://127.0.0.1:{port}"
    async with running_haproxy(config, [url]):
        yield Balancer(url, balance)


async def post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], user: str | None = None
) -> Any:
    async with session.post(url, json=body, headers={UID: user} if user else {}) as response:
        assert response.status == 200, f"{url}: {response.status} {await response.text()}"
        return await response.json()


async def new_order(session: aiohttp.ClientSession, stack: Stack, user: str) -> str:
    body = {"user_id": user, "service": "taxi", "status": "driving"}
    created = await post(session, f"{stack.url('emulator')}/emulator/v1/orders", body)
    orderid: str = created["orderid"]
    return orderid


async def upstream_calls(session: aiohttp.ClientSession, stack: Stack, upstream: str) -> int:
    """The calls a part upstream got (the emulator names a part upstream's calls `part:<name>`)."""
    async with session.get(f"{stack.url('emulator')}/emulator/v1/stats") as response:
        count: int = (await response.json())["calls"].get(f"part:{upstream}", 0)
        return count


async def metric_sum(session: aiohttp.ClientSession, url: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples with those labels in one process's /metrics."""
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


async def part_requests_by_replica(
    session: aiohttp.ClientSession, stack: Stack, routes: Sequence[str]
) -> list[int]:
    """Each replica's answered requests on those routes (its own /metrics)."""
    return [
        int(
            sum(
                [
                    await metric_sum(session, url, "http_requests_total", route=route)
                    for route in routes
                ]
            )
        )
        for url in stack.urls(BACKEND)
    ]


async def parts_started_by_replica(
    session: aiohttp.ClientSession, stack: Stack, part: str
) -> list[int]:
    """Each replica's requests of a taxi part, counted as they start (held ones too)."""
    return [
        int(await metric_sum(session, url, "mlutp_part_requests_total", part=part))
        for url in stack.urls(BACKEND)
    ]


async def fetch_round(
    session: aiohttp.ClientSession, stack: Stack, front: str, user: str, orderid: str
) -> int:
    """The order's changing part fetched by the user's devices at once through the balancer:
    the calls its upstream got. Every request is answered with its data (degraded, never an
    error)."""
    url, upstream = changing_part()
    before = await upstream_calls(session, stack, upstream)
    body = {"orders": [{"orderid": orderid}]}
    answers = await asyncio.gather(
        *(post(session, f"{front}{url}", body, user) for _ in range(DEVICES))
    )
    for answer in answers:
        [part] = answer["orders"]
        assert part["orderid"] == orderid and "error" not in part, part
    return await upstream_calls(session, stack, upstream) - before


@contextlib.asynccontextmanager
async def in_service(
    session: aiohttp.ClientSession, stack: Stack, front: str, users: Sequence[str]
) -> AsyncIterator[None]:
    """Each user's `slow` part held in flight through the balancer for HOLD_MS: a fleet in
    service. Ready once every replica counted them all; waited for at the end."""
    orders = [await new_order(session, stack, user) for user in users]
    fault = {"target": SLOW_TARGET, "mode": "slow", "delay_ms": HOLD_MS}
    await post(session, f"{stack.url('emulator')}/emulator/v1/faults", fault)
    slow = part_url("slow")
    held = [
        asyncio.create_task(post(session, f"{front}{slow}", {"orders": [{"orderid": o}]}, u))
        for u, o in zip(users, orders, strict=True)
    ]
    try:
        # a part request is counted as it starts: all of them are held on the replicas then
        async with asyncio.timeout(HOLD_MS / 2000):
            while True:
                if sum(await parts_started_by_replica(session, stack, "slow")) >= len(users):
                    break
                await asyncio.sleep(0.02)  # nothing to await but the counters
        yield
    finally:
        await asyncio.gather(*held, return_exceptions=True)
        await post(session, f"{stack.url('emulator')}/emulator/v1/faults", {**fault, "mode": "ok"})


def background_users(replicas: int) -> list[str]:
    return [BACKGROUND_USER.format(i) for i in range(IN_SERVICE_PER_REPLICA * replicas)]


async def measure(replicas: int, rounds: int) -> dict[str, list[int]]:
    """Calls per round: routed on an idle fleet, routed in service, sprayed."""
    stack = fleet(replicas)
    await stack.start(ready_timeout_s=60)
    try:
        async with (
            aiohttp.ClientSession() as session,
            balancer(stack) as routed,
            balancer(stack, SPRAYED) as sprayed,
        ):
            user = USER
            orders = [await new_order(session, stack, user) for _ in range(3 * rounds)]
            assert stack.redis is not None
            stack.redis.stop()
            results: dict[str, list[int]] = {"routed, idle": []}
            for orderid in orders[:rounds]:
                results["routed, idle"].append(
                    await fetch_round(session, stack, routed.url, user, orderid)
                )
            async with in_service(session, stack, routed.url, background_users(replicas)):
                for name, front, chunk in (
                    ("routed", routed, orders[rounds : 2 * rounds]),
                    ("sprayed", sprayed, orders[2 * rounds :]),
                ):
                    results[name] = [
                        await fetch_round(session, stack, front.url, user, orderid)
                        for orderid in chunk
                    ]
            return results
    finally:
        await stack.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print(
        f"order core calls per round ({DEVICES} devices asking for {CHANGING_PART} of one order "
        f"at once, tag store down), mean of "
        f"{args.rounds} rounds"
    )
    print(f"{'replicas':>8} {'routed':>8} {'routed, idle':>13} {'sprayed':>8}")
    for replicas in args.replicas:
        results = asyncio.run(measure(replicas, args.rounds))
        row = {name: sum(calls) / len(calls) for name, calls in results.items()}
        print(
            f"{replicas:>8} {row['routed']:>8.2f} {row['routed, idle']:>13.2f} "
            f"{row['sprayed']:>8.2f}"
        )


if __name__ == "__main__":
    main()

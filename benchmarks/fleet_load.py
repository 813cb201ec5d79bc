"""Benchmark: load per fleet, through restarts (issue 47 item 5; docs/protocol.md: A fleet).

Three replicas of orders_state and of launch (devtools.stack.Stack) behind the shipped
balancer (deploy/haproxy/haproxy.cfg rendered for this machine's ports by
devtools.balancer.local_config, run by a real haproxy: whatever routing the file ships), on a
Redis of the script's own that keeps an append-only file as the compose Redis does. N users
(300), each with three active orders, each running the reference client (waiting polls) that
reaches launch and orders_state only through haproxy. The script changes orders all along
(each order's eta about once a minute, the emulator driver's fast-change rate; its driver is
off), so tag writes go on in every phase. The emulator's counters (calls and work per upstream
endpoint) are read every 250 ms, and every user's own (GET /emulator/v1/stats?user_id=) every
5 s: each user has one order per service, so what the taxi part services, totw and taxiroute
did for a user was for its taxi order, and each details endpoint's for that service's order.

Phases, run one after another, each but the first after a steady lead (--settle s):
 1 steady (--steady s): its source rate is the sources' baseline;
 2 the tag store down: the stack's Redis SIGSTOPped (--store-down s), then SIGCONT; the
   changes meanwhile fail to write their tags and are retried by the writers;
 3 a rolling restart of the orders_state replicas (Stack.restart: each SIGTERMed and started
   again in turn, the next once /ping answers);
 4 one orders_state replica SIGKILLed, started again --killed-for s later;
 5 Redis restarted: SIGTERM, then started again on its port (its append-only file reloaded);
 6 Redis flushed (FLUSHALL).
Each phase runs --after s after its fault (phase 6: --after-flush s).

Per phase, per 5-s window: order-source calls (all services) against 2x the steady rate; the
part upstreams' work (emulator/work.py; every priced upstream, devtools.loadtest
priced_target: the taxi part services, taxiroute, totw and the details) against what the same
users' legacy clients gave them (redis_loss.legacy_rate: each order's document every 5 s on
iOS, 10 s on Android; a document's work the sum of its fields' prices, fleet_windows.Legacy),
and beside it the calls of the documents (devtools.loadtest HEAVY_TARGETS) and of the
performer info service (each legacy totw asked it once). Per order (a user's order of each
service): the work done for it against its legacy document's, and the most calls of any one
part upstream for it against legacy's 1, each plus a fetch for every change the script made
to it then (the work of the parts holding the changed field, a call). The verdict takes every
sliding 5-s window (each 250 ms read as its start), the tiles printed are a view of them.

    python benchmarks/fleet_load.py [--users 300] [--replicas 3] [--ramp S] [--steady 60]
        [--settle 20] [--after 30] [--store-down 30] [--killed-for 15] [--after-flush 60]
        [--changes 1] [--no-per-order] [--phases 2,3,4,5,6] [--set NAME=VALUE ...]

`--set` sets a protocol setting of orders_state and launch (services/bff/config.py, a JSON
value). The ramp defaults to a kept answer's mean age limit (7/8 of list_max_age: each is
drawn between 3/4 and all of it), so that phase 1 measures the sources' steady rate, as in a
population that has polled for long: each (user, service) is then asked about once per mean
limit. A longer ramp spreads the first re-asks wider than that and measures less: 145 s, the
old default, gave 6.2 calls/s where the same 300 users settle at about 8.

A smoke run in under two minutes:

    python benchmarks/fleet_load.py --users 30 --ramp 5 --steady 10 --settle 5 --after 10 \
        --store-down 5 --killed-for 5 --after-flush 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import uvloop

from benchmarks.fleet_windows import CHANGED_FIELD, WINDOW_S, Legacy, Phase, Readings, report
from benchmarks.redis_loss import (
    SERVICES,
    STATUSES,
    client_errors,
    flushall,
    legacy_rate,
    list_max_age_s,
    metric_samples,
    post_json,
    reset_stats,
)
from client.client import MlutpClient
from client.model import ClientOptions
from devtools.balancer import local_config, running_haproxy
from devtools.stack import STACK, Stack, free_ports_env
from services.bff.config import ProtocolSettings
from shared.embedded_redis import EmbeddedRedis, free_port
from shared.policy import DEFAULT_POLICY_PATH
from shared.protocol.list_tags import KEPT_AGE_SPREAD_FROM

BFF = ("orders_state", "launch")
# as compose.yaml runs its Redis: a restart reloads the append-only file, it is not a flush
REDIS_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")
# the changes in flight at once: a tag store that does not answer holds each for the writer's
# timeout, and the script must not pile them up
CHANGES_IN_FLIGHT = 16
# the fault phases, in the order they run by default (phase 1, the steady baseline, always runs)
FAULT_PHASES = ("2", "3", "4", "5", "6")


@dataclass
class Changer:
    """Changes random orders' eta at a steady rate (per order per minute), a bounded number in
    flight: a tag write per change, in every phase."""

    session: aiohttp.ClientSession
    emulator: str
    orders: list[tuple[str, str, str]]  # user, service, orderid
    per_order_min: float
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "failed": 0, "skipped": 0})
    # (when, user, service) of every change sent
    changes: list[tuple[float, str, str]] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        rng = random.Random(7)
        limit = asyncio.Semaphore(CHANGES_IN_FLIGHT)
        due = 0.0
        pending: set[asyncio.Task[None]] = set()
        while not stop.is_set():
            due += len(self.orders) * self.per_order_min / 60
            while due >= 1:
                due -= 1
                if limit.locked():
                    self.counts["skipped"] += 1
                    continue
                user, service, orderid = rng.choice(self.orders)
                self.changes.append((time.perf_counter(), user, service))
                task = asyncio.create_task(self.change(limit, service, orderid, rng))
                pending.add(task)
                task.add_done_callback(pending.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        await asyncio.gather(*pending, return_exceptions=True)

    async def change(
        self, limit: asyncio.Semaphore, service: str, orderid: str, rng: random.Random
    ) -> None:
        async with limit:
            url = f"{self.emulator}/emulator/v1/orders/{service}/{orderid}/change"
            body = {"fields": {CHANGED_FIELD: {"minutes": rng.randint(1, 30)}}}
            try:
                async with self.session.post(
                    url, json=body, timeout=aiohttp.ClientTimeout(total=15)
                ) as response:
                    await response.read()
                    ok = response.status == 200
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            self.counts["ok" if ok else "failed"] += 1


async def create_orders(
    session: aiohttp.ClientSession, emulator: str, users: list[str]
) -> list[tuple[str, str, str]]:
    """Every user's three orders, a few at a time (a burst would miss order_tags' Redis
    deadline): (user, service, orderid) each."""
    limit = asyncio.Semaphore(20)

    async def create(user: str, service: str) -> tuple[str, str, str]:
        async with limit:
            body = {"user_id": user, "service": service, "status": STATUSES[service]}
            created = await post_json(session, f"{emulator}/emulator/v1/orders", body)
            return user, service, str(created["orderid"])

    return list(
        await asyncio.gather(*(create(user, service) for user in users for service in SERVICES))
    )


async def polls_held(session: aiohttp.ClientSession, stack: Stack) -> float:
    """Waiting polls held by all orders_state replicas (each one's gauge)."""
    total = 0.0
    for url in stack.urls("orders_state"):
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            total += (await metric_samples(session, url, "mlutp_polls_held")).get("", 0.0)
    return total


async def source_outcomes(session: aiohttp.ClientSession, stack: Stack) -> Counter[str]:
    """mlutp_order_source_calls by outcome, summed over the BFF replicas running now (a
    replica started again counts from zero)."""
    totals: Counter[str] = Counter()
    for name in BFF:
        for url in stack.urls(name):
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                samples = await metric_samples(
                    session, url, "mlutp_order_source_calls_total", label="outcome"
                )
                totals.update({outcome: int(value) for outcome, value in samples.items()})
    return totals


async def until_held(
    session: aiohttp.ClientSession, stack: Stack, count: int, timeout_s: float
) -> float:
    deadline = time.monotonic() + timeout_s
    while True:
        held = await polls_held(session, stack)
        if held >= count or time.monotonic() > deadline:
            return held
        await asyncio.sleep(0.25)  # another process's gauge: nothing to await but a read


async def kill_replica(stack: Stack, name: str, replica: int) -> tuple[int, dict[str, str]]:
    """SIGKILL one replica, as a crash: its port and environment, to start it again."""
    service, process = [(s, p) for s, p in stack.processes if s.name == name][replica]
    process.kill()
    await process.wait()
    stack.processes.remove((service, process))
    # Stack keeps each process's environment by pid for its own restarts: this one is ours
    return process.pid, stack._envs.pop(process.pid)


async def start_replica(stack: Stack, name: str, env: dict[str, str]) -> None:
    service = next(s for s in stack.services if s.name == name)
    await stack._spawn(service, env, 30.0)


def routing(config: str, backend: str) -> str:
    """A backend's balance lines in a haproxy config: what routes a user's requests."""
    lines, inside = [], False
    for line in config.splitlines():
        if line and not line[0].isspace():
            inside = line.split() == ["backend", backend]
        elif inside and line.split()[:1] in (["balance"], ["hash-type"], ["hash-balance-factor"]):
            lines.append(" ".join(line.split()))
    return "; ".join(lines) or "haproxy's default (roundrobin)"


@dataclass(frozen=True)
class Options:
    users: int
    replicas: int
    wait_ms: int
    ramp_s: float | None
    steady_s: float
    settle_s: float
    after_s: float
    store_down_s: float
    killed_for_s: float
    after_flush_s: float
    changes_per_order_min: float
    per_order: bool
    protocol: dict[str, Any]
    phases: tuple[str, ...] = FAULT_PHASES


async def measure(options: Options, stack: Stack, redis: EmbeddedRedis, legacy: Legacy) -> None:
    emulator = stack.url("emulator")
    ports = {name: free_port() for name in BFF}
    config = local_config({name: stack.urls(name) for name in BFF}, ports)
    fronts = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    print(f"routing of orders_state (the shipped file): {routing(config, 'orders_state')}")
    ramp_s = options.ramp_s
    if ramp_s is None:
        ramp_s = (1 + KEPT_AGE_SPREAD_FROM) / 2 * list_max_age_s(options.protocol)
    connector = aiohttp.TCPConnector(limit=0)
    async with (
        running_haproxy(config, list(fronts.values())),
        aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=60)
        ) as session,
    ):
        await post_json(session, f"{emulator}/emulator/v1/driver", {"enabled": False})
        users = [f"fleet-load-{index}" for index in range(options.users)]
        orders = await create_orders(session, emulator, users)
        clients = [
            MlutpClient(
                session,
                launch_url=f"{fronts['launch']}/4.0/launch",
                orders_state_url=fronts["orders_state"],
                user_id=user,
                supported_services=SERVICES,
                options=ClientOptions(poll_route=False, wait_ms=options.wait_ms),
                rng=random.Random(index),
            )
            for index, user in enumerate(users)
        ]
        stop = asyncio.Event()

        async def start(client: MlutpClient, delay: float) -> None:
            await asyncio.sleep(delay)  # apps start at different moments
            await client.run(stop)

        per_user = users if options.per_order else []
        readings = Readings(emulator, per_user, list_max_age_s(options.protocol))
        readings.start()
        changer = Changer(session, emulator, orders, options.changes_per_order_min)
        tasks = [
            asyncio.create_task(start(client, ramp_s * index / len(clients)))
            for index, client in enumerate(clients)
        ]
        changing = asyncio.create_task(changer.run(stop))
        phases: list[Phase] = []
        failure = ""

        async def phase(
            name: str, what: str, fault: Callable[[Phase], Awaitable[None]], after_s: float
        ) -> None:
            current = Phase(name, what)
            phases.append(current)
            reset_stats(clients)
            changes = dict(changer.counts)
            current.held = await polls_held(session, stack)
            outcomes = await source_outcomes(session, stack)
            current.start = time.perf_counter()
            await fault(current)
            await asyncio.sleep(after_s)
            current.end = time.perf_counter()
            current.errors = client_errors(clients)
            current.source_outcomes = dict(await source_outcomes(session, stack) - outcomes)
            current.changes = {k: v - changes[k] for k, v in changer.counts.items()}
            print(f"  {name}: done ({current.end - current.start:.0f} s)", flush=True)

        def event(current: Phase, label: str) -> None:
            current.events.append((time.perf_counter(), label))

        async def steady(current: Phase) -> None:
            await asyncio.sleep(0)

        async def settled(current: Phase) -> None:
            await asyncio.sleep(options.settle_s)

        async def store_down(current: Phase) -> None:
            await settled(current)
            event(current, "SIGSTOP redis")
            redis.pause()
            await asyncio.sleep(options.store_down_s)
            redis.resume()
            event(current, "SIGCONT redis")

        async def rolling(current: Phase) -> None:
            await settled(current)
            event(current, "rolling restart begins")
            # each replica SIGTERMed, started again and /ping answering before the next
            await stack.restart("orders_state", {})
            event(current, "every replica restarted")

        async def killed(current: Phase) -> None:
            await settled(current)
            event(current, "SIGKILL orders_state #2")
            _, env = await kill_replica(stack, "orders_state", 1)
            await asyncio.sleep(options.killed_for_s)
            event(current, "#2 starting")
            await start_replica(stack, "orders_state", env)
            event(current, "#2 answers /ping")

        async def redis_restart(current: Phase) -> None:
            await settled(current)
            event(current, "SIGTERM redis")
            await asyncio.to_thread(redis.terminate)
            await asyncio.to_thread(redis.start)
            event(current, "redis started (AOF loaded)")

        async def flushed(current: Phase) -> None:
            await settled(current)
            event(current, "FLUSHALL")
            await asyncio.to_thread(flushall, redis.url)

        try:
            await asyncio.sleep(ramp_s)
            held = await until_held(session, stack, len(clients), options.wait_ms / 1000 + 15)
            print(f"ramp done ({ramp_s:.0f} s): {held:.0f} polls held", flush=True)
            steady_what = "steady: no fault (its source rate is the baseline)"
            await phase("1", steady_what, steady, options.steady_s)
            faults: dict[str, tuple[str, Callable[[Phase], Awaitable[None]], float]] = {
                "2": (
                    f"the tag store down: the stack's Redis SIGSTOPped {options.store_down_s:.0f}"
                    " s (orders changing meanwhile: tag writes fail and are retried)",
                    store_down,
                    options.after_s,
                ),
                "3": (
                    "rolling restart of the orders_state replicas (SIGTERM, start, /ping, next)",
                    rolling,
                    options.after_s,
                ),
                "4": (
                    f"orders_state replica #2 SIGKILLed, started again "
                    f"{options.killed_for_s:.0f} s later",
                    killed,
                    options.after_s,
                ),
                "5": (
                    "Redis restarted: SIGTERM, started again on its port (append-only file)",
                    redis_restart,
                    options.after_s,
                ),
                "6": ("Redis flushed (FLUSHALL)", flushed, options.after_flush_s),
            }
            for name in options.phases:
                what, fault, after_s = faults[name]
                await phase(name, what, fault, after_s)
        except Exception as exc:
            # the phases measured so far are reported; the one that failed is not
            failure = f"phase {phases[-1].name if phases else '-'} failed: {exc!r}"
        finally:
            stop.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(changing, *tasks, return_exceptions=True), 30)
            readings.stop()
    failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
    done = [p for p in phases if p.end]
    if done:
        report(options.users, options.per_order, readings, done, changer.changes, legacy)
    if failure:
        print(f"\n{failure}")
    if failed:
        print(
            f"\n{len(failed)} clients stopped with an error, the first: {failed[0].exception()!r}"
        )


async def run(options: Options) -> None:
    legacy_per_s, ios = legacy_rate(options.users)
    legacy = Legacy.build(options.protocol.get("policy_path", str(DEFAULT_POLICY_PATH)))
    legacy_work_s = legacy.window(options.users).work / WINDOW_S
    print(
        f"fleet_load: {options.replicas} replicas of orders_state and launch behind haproxy "
        f"(deploy/haproxy/haproxy.cfg), {options.users} users x 3 active orders, reference "
        f"clients with wait_ms {options.wait_ms}; orders changed {options.changes_per_order_min}"
        f"/order/min; legacy baseline {legacy_per_s:.1f} documents/s, {legacy_work_s:.0f} work "
        f"units/s ({ios} iOS users)"
        + "".join(f"; --set {name}={value}" for name, value in options.protocol.items()),
        flush=True,
    )
    services = [s for s in STACK if s.name in ("order_tags", "emulator", *BFF)]
    redis = EmbeddedRedis(extra_args=REDIS_ARGS)
    await asyncio.to_thread(redis.start)
    env = {**os.environ, **free_ports_env(services), "LOG_LEVEL": "CRITICAL"}
    env.pop("REDIS_CLUSTER_NODES", None)
    env.update(REDIS_URL=redis.url, EMULATOR_DRIVER_ENABLED="false")
    settings = {name: {"protocol": options.protocol} for name in BFF}
    stack = Stack(env, services, replicas=options.replicas, settings=settings)
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    # a `timeout` or CI limit cancels the run: every process is still stopped
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await stack.start(ready_timeout_s=60)
        await measure(options, stack, redis, legacy)
    finally:
        await stack.close()
        await asyncio.to_thread(redis.close)
        loop.remove_signal_handler(signal.SIGTERM)


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add = parser.add_argument
    add("--users", type=int, default=300)
    add("--replicas", type=int, default=3)
    add("--wait-ms", type=int, default=25_000)
    add("--ramp", type=float, default=None, help="clients' starts spread (7/8 of list_max_age)")
    add("--steady", type=float, default=60.0, help="phase 1: seconds of steady polling")
    add("--settle", type=float, default=20.0, help="steady seconds before each fault")
    add("--after", type=float, default=30.0, help="seconds after each fault (phases 2-5)")
    add("--store-down", type=float, default=30.0, help="phase 2: seconds Redis is stopped")
    add("--killed-for", type=float, default=15.0, help="phase 4: seconds the replica is dead")
    add("--after-flush", type=float, default=60.0, help="phase 6: seconds after FLUSHALL")
    add("--changes", type=float, default=1.0, help="changes per order per minute")
    add("--no-per-order", action="store_true", help="skip the per-user counter reads")
    add(
        "--phases",
        default=",".join(FAULT_PHASES),
        help="the fault phases to run, in this order (e.g. 4 alone: its own effect, not an "
        "earlier phase's echo)",
    )
    add("--set", action="append", default=[], metavar="NAME=VALUE", help="a protocol setting")
    args = parser.parse_args(argv)
    protocol: dict[str, Any] = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or name not in ProtocolSettings.model_fields:
            parser.error(f"--set takes NAME=VALUE of a protocol setting, not {item!r}")
        protocol[name] = json.loads(value)
    phases = tuple(name.strip() for name in args.phases.split(",") if name.strip())
    if not set(phases) <= set(FAULT_PHASES):
        parser.error(f"--phases takes names of {', '.join(FAULT_PHASES)}, not {args.phases!r}")
    if args.users < 1 or args.replicas < 2 or args.steady < WINDOW_S:
        parser.error("--users ≥ 1, --replicas ≥ 2, --steady ≥ 5")
    return Options(
        users=args.users,
        replicas=args.replicas,
        wait_ms=args.wait_ms,
        ramp_s=args.ramp,
        steady_s=args.steady,
        settle_s=args.settle,
        after_s=args.after,
        store_down_s=args.store_down,
        killed_for_s=args.killed_for,
        after_flush_s=args.after_flush,
        changes_per_order_min=args.changes,
        per_order=not args.no_per_order,
        protocol=protocol,
        phases=phases,
    )


if __name__ == "__main__":
    uvloop.run(run(parse_args()))

"""Benchmark: order-source calls when the tag cache's Redis is lost (issue 38).

A whole stack of its own on free loopback ports (an embedded Redis, order_tags, the emulator,
orders_state, launch), the emulator's background driver off, so that nothing changes but what
this script does. N users (300), each with three active orders made through the emulator's
control API (taxi driving, eats cooking, grocery assembling), each running the reference
client (client.MlutpClient: launch, then waiting polls of all three services with the tags
its part fetches got; again at once after a wait that ended by news or timeout, at the
interval after `X-Mlutp-Wait: unavailable | shed`, after Retry-After and a random part of a
second after a 503). The clients start spread over the ramp. The emulator's call counters
(GET /emulator/v1/stats) are read every 250 ms; each window is the difference of two reads,
and every fault is made right after a read, so windows start at it.

B (run first: its steady rate needs kept source answers of every age, as in a population
that has polled for long, so the ramp defaults to list_max_age plus one wait): source calls
per second for --steady s (20), then FLUSHALL of the stack's Redis, then source calls per
second for --after-flush s (120). Goal: no second above 2x the steady rate.

A: once every client's waiting poll is held (orders_state's gauge mlutp_polls_held),
SIGKILL of the stack's Redis; --down s (10) later it is started again, empty, on its port;
then --after-restart s (10). Source calls in each 250 ms window from --before-kill s (2)
before the kill to the end. Goal: no window above the legacy clients' steady rate in a
window of the same length. The legacy baseline is the load test's (devtools/loadtest): the
same users polling every order's whole document (totw, eats and grocery details) every 5 s
(iOS) or 10 s (Android), iOS drawn as the load test draws it; such a client asks the order
sources only at launch (at app start, and after an order finishes), none in steady polling.

    python benchmarks/redis_loss.py [--users 300] [--wait-ms 25000] [--ramp S]
        [--steady 20] [--after-flush 120] [--before-kill 2] [--down 10] [--after-restart 10]
        [--set NAME=VALUE ...]

`--set` sets a protocol setting of orders_state (services/bff/config.py: ProtocolSettings,
a JSON value); list_max_age_s is left at its default unless set this way. A run takes about
10 s of set-up, the ramp and the phases: about 5 minutes at the defaults with list_max_age
120 s. A smoke run in under a minute (its steady rate is not a long-running population's, and
the output says so):

    python benchmarks/redis_loss.py --users 60 --after-flush 30 --ramp 5 --steady 5 \
        --down 5 --after-restart 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import queue
import random
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import redis
import uvloop
from prometheus_client.parser import text_string_to_metric_families

from client.client import MlutpClient
from client.model import ClientOptions
from client.transport import ClientStats
from devtools.loadtest.config import HEAVY_TARGETS, LoadtestConfig
from devtools.stack import STACK, Stack, free_ports_env, own_stack
from services.bff.config import ProtocolSettings

PERIOD_S = 0.25
# the statuses the orders are made in: long-lived ones, each service's poll interval base
STATUSES = {"taxi": "driving", "eats": "cooking", "grocery": "assembling"}
SERVICES = tuple(STATUSES)
PROCESSES = ("order_tags", "emulator", "orders_state", "launch")
LEGACY_PERIODS_S = {"ios": 5.0, "android": 10.0}
LIST_MAX_AGE = "list_max_age_s"


# --- the emulator's counters, read every 250 ms ------------------------------------------------


@dataclass(frozen=True)
class Sample:
    at: float  # perf_counter, the middle of the read
    sources: dict[str, int]  # order-source calls per service since the emulator started
    documents: int  # heavy calls (totw, eats and grocery details) since it started


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    sources: dict[str, int]
    documents: int

    @property
    def calls(self) -> int:
        return sum(self.sources.values())

    @property
    def length(self) -> float:
        return self.end - self.start


def read_sample(url: str) -> Sample | None:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            stats = json.loads(response.read())
    except (OSError, ValueError):
        return None  # the emulator did not answer in time: the next window is longer
    calls: dict[str, int] = stats["calls"]
    return Sample(
        (started + time.perf_counter()) / 2,
        {service: int(calls.get(f"source:{service}", 0)) for service in SERVICES},
        sum(int(calls.get(target, 0)) for target in HEAVY_TARGETS),
    )


class Sampler(threading.Thread):
    """Reads the emulator's stats every period on a fixed schedule, in a thread of its own
    (the clients' event loop does not delay it). A fault is made by this thread right after
    a read, so that the windows after it start at it."""

    def __init__(self, stats_url: str, period_s: float = PERIOD_S) -> None:
        super().__init__(name="stats-sampler", daemon=True)
        self.stats_url = stats_url
        self.period_s = period_s
        self.samples: list[Sample] = []
        self._actions: queue.SimpleQueue[tuple[Callable[[], object], Future[float]]] = (
            queue.SimpleQueue()
        )
        self._stopped = threading.Event()

    def run(self) -> None:
        next_at = time.perf_counter()
        while not self._stopped.is_set():
            sample = read_sample(self.stats_url)
            if sample is not None:
                self.samples.append(sample)
                while True:
                    try:
                        action, done = self._actions.get_nowait()
                    except queue.Empty:
                        break
                    at = time.perf_counter()
                    try:
                        action()
                    except Exception as exc:
                        done.set_exception(exc)
                    else:
                        done.set_result(at)
            next_at += self.period_s
            now = time.perf_counter()
            if next_at < now:
                next_at = now  # behind schedule (a slow read, a restart): a new grid from here
            self._stopped.wait(next_at - now)

    async def act(self, action: Callable[[], object] = lambda: None) -> float:
        """Run `action` right after the next read; when it started (perf_counter)."""
        done: Future[float] = Future()
        self._actions.put((action, done))
        if not self.is_alive():
            raise RuntimeError("the stats sampler has stopped")
        # bounded: a sampler that stopped reading, or a Redis that does not start, ends the run
        return await asyncio.wait_for(asyncio.wrap_future(done), 30)

    def stop(self) -> None:
        self._stopped.set()
        self.join(5)

    def windows(self, start: float, end: float) -> list[Window]:
        """The windows between reads from `start` to `end` (within a few ms: the reads an
        action came right after)."""
        slack = 0.05
        chosen = [s for s in self.samples if start - slack <= s.at <= end + slack]
        return [
            Window(
                a.at,
                b.at,
                {service: b.sources[service] - a.sources[service] for service in SERVICES},
                b.documents - a.documents,
            )
            for a, b in itertools.pairwise(chosen)
        ]


def per_second(windows: Sequence[Window], origin: float) -> list[int]:
    """Source calls per second from `origin`, each window counted in the second it starts in
    (they start on the origin's 250 ms grid)."""
    seconds: list[int] = []
    for window in windows:
        second = int((window.start - origin + 0.05) // 1.0)
        while len(seconds) <= second:
            seconds.append(0)
        seconds[second] += window.calls
    return seconds


# --- the stack and the clients -----------------------------------------------------------------


def list_max_age_s(protocol: Mapping[str, Any]) -> float:
    """The kept answers' age limit in effect: the product's default unless --set sets it."""
    return float(protocol.get(LIST_MAX_AGE, ProtocolSettings().list_max_age_s))


def legacy_rate(users: int) -> tuple[float, int]:
    """The legacy clients' steady upstream calls per second, and how many of them are iOS:
    every order's whole document once a period, iOS drawn as the load test draws it
    (devtools/loadtest/phases.py: one draw per client from Random(seed), in user order)."""
    config = LoadtestConfig()
    rng = random.Random(config.seed)
    ios = sum(rng.random() < config.ios_share for _ in range(users))
    per_client = len(SERVICES)  # one document per order, every order of every service
    rate = per_client * (
        ios / LEGACY_PERIODS_S["ios"] + (users - ios) / LEGACY_PERIODS_S["android"]
    )
    return rate, ios


async def post_json(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with session.post(url, json=body) as response:
        payload = await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: {response.status} {payload[:200]!r}")
        return json.loads(payload)


async def create_orders(session: aiohttp.ClientSession, emulator: str, users: list[str]) -> None:
    # a few at a time: a burst of creations would miss order_tags' Redis deadline
    limit = asyncio.Semaphore(20)

    async def create(user: str, service: str) -> None:
        async with limit:
            body = {"user_id": user, "service": service, "status": STATUSES[service]}
            await post_json(session, f"{emulator}/emulator/v1/orders", body)

    await asyncio.gather(*(create(user, service) for user in users for service in SERVICES))


async def metric_samples(
    session: aiohttp.ClientSession, url: str, name: str, label: str = "cause"
) -> dict[str, float]:
    """A metric's samples from a service's /metrics, summed by their `label` ("" for none):
    the samples that differ only in other labels add up."""
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    summed: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                key = sample.labels.get(label, "")
                summed[key] = summed.get(key, 0.0) + sample.value
    return summed


async def until_held(
    session: aiohttp.ClientSession, url: str, count: int, timeout_s: float
) -> float:
    """Until orders_state holds `count` polls (its gauge mlutp_polls_held is another
    process's: read again every 50 ms), or the timeout: the number held then."""
    deadline = time.monotonic() + timeout_s
    while True:
        held = (await metric_samples(session, url, "mlutp_polls_held")).get("", 0.0)
        if held >= count or time.monotonic() > deadline:
            return held
        await asyncio.sleep(0.05)


def flushall(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushall()
    finally:
        client.close()


def client_errors(clients: Sequence[MlutpClient]) -> str:
    stats = [c.stats for c in clients]
    return (
        f"{sum(s.server_errors for s in stats)} 5xx answers, "
        f"{sum(s.errors - s.server_errors for s in stats)} other errors (no answer, 4xx)"
    )


def reset_stats(clients: Sequence[MlutpClient]) -> None:
    for client in clients:
        client.stats = ClientStats()


# --- the report --------------------------------------------------------------------------------


def goal(met: bool) -> str:
    return "met" if met else "NOT MET"


def report_a(
    windows: list[Window],
    kill_at: float,
    restart_at: float,
    legacy_per_s: float,
    held: float,
    users: int,
    causes: Mapping[str, float],
    errors: str,
) -> None:
    legacy_window = legacy_per_s * PERIOD_S
    print(
        f"\nA. Redis SIGKILLed with {held:.0f} of {users} waiting polls held; started again "
        f"empty on its port {restart_at - kill_at:.1f} s later"
    )
    print(
        "   source calls per 250 ms window (s from the kill; * above the legacy rate; "
        "documents beside)"
    )
    for first in range(0, len(windows), 4):
        row = windows[first : first + 4]
        # on the kill's 250 ms grid (reads come a few ms either side of it); + 0.0: no -0.00
        offset = round((row[0].start - kill_at) / PERIOD_S) * PERIOD_S + 0.0
        marks = "".join(
            f"{w.calls:6d}{'*' if w.calls > legacy_per_s * w.length else ' '}" for w in row
        )
        docs = " ".join(f"{w.documents:4d}" for w in row)
        event = ""
        if any(abs(w.start - kill_at) < 0.05 for w in row):
            event = "  <- kill"
        elif any(abs(w.start - restart_at) < 0.05 for w in row):
            event = "  <- restart"
        print(f"   {offset:+6.2f} s {marks:<28s} | {docs}{event}")
    long = [w for w in windows if w.length > 1.5 * PERIOD_S]
    if long:
        print(
            f"   {len(long)} windows longer than {1.5 * PERIOD_S * 1000:.0f} ms (late reads), "
            f"the longest {max(w.length for w in long) * 1000:.0f} ms; each is held to the "
            f"legacy rate over its own length"
        )
    after_kill = [w for w in windows if w.start >= kill_at - 0.05]
    down = [w for w in after_kill if w.start < restart_at - 0.05]
    up = [w for w in after_kill if w.start >= restart_at - 0.05]
    first_second = [w for w in after_kill if w.start < kill_at + 1.0 - 0.05]
    by_service: Counter[str] = Counter()
    for window in first_second:
        by_service.update(window.sources)
    peak = max(windows, key=lambda w: w.calls)
    above = [w for w in windows if w.calls > legacy_per_s * w.length]
    print(
        f"   first second after the kill: {sum(w.calls for w in first_second)} source calls "
        f"({', '.join(f'{s} {by_service[s]}' for s in SERVICES)}); while down "
        f"{sum(w.calls for w in down)} in {restart_at - kill_at:.1f} s; after the restart "
        f"{sum(w.calls for w in up)} in {sum(w.length for w in up):.1f} s"
    )
    print(
        "   held polls' answers in the second after the kill, by X-Mlutp-Wait: "
        + (", ".join(f"{cause} {count:.0f}" for cause, count in causes.items()) or "none")
    )
    print(f"   clients from the kill to the end: {errors}")
    print(
        f"   max window {peak.calls} source calls at {peak.start - kill_at:+.2f} s; legacy "
        f"steady {legacy_window:.1f} per 250 ms; goal (no window above it): "
        f"{goal(not above)} ({len(above)} of {len(windows)} windows above)"
    )


def report_b(
    steady: list[Window],
    after: list[Window],
    flush_at: float,
    ramp_s: float,
    aged_s: float,
    errors: str,
) -> None:
    steady_s = sum(w.length for w in steady)
    steady_rate = sum(w.calls for w in steady) / steady_s if steady_s else 0.0
    steady_seconds = per_second(steady, steady[0].start) if steady else []
    seconds = per_second(after, flush_at)
    print(
        f"\nB. FLUSHALL of the stack's Redis, the clients polling steadily (waiting polls); "
        f"steady rate over the {steady_s:.0f} s before it: {steady_rate:.1f} source calls/s "
        f"(its seconds {min(steady_seconds, default=0)}..{max(steady_seconds, default=0)})"
    )
    if ramp_s < aged_s:
        print(
            f"   NOTE: the clients started over {ramp_s:.0f} s, under list_max_age plus a "
            f"wait ({aged_s:.0f} s): the kept answers had not all aged, so this steady rate "
            f"is below a long-running population's"
        )
    print("   source calls per second after it:")
    for first in range(0, len(seconds), 10):
        row = " ".join(f"{count:5d}" for count in seconds[first : first + 10])
        print(f"   {first:+4d} s {row}")
    bound = 2 * steady_rate
    above = [i for i, count in enumerate(seconds) if count > bound]
    peak = max(range(len(seconds)), key=lambda i: seconds[i]) if seconds else 0
    print(f"   clients from the flush to the end: {errors}")
    print(
        f"   max second {max(seconds, default=0)} at {peak:+d} s; steady {steady_rate:.1f}/s; "
        f"goal (no second above 2x steady, {bound:.1f}): {goal(not above)} "
        f"({len(above)} of {len(seconds)} seconds above"
        + (f", the first at {above[0]:+d} s, the last at {above[-1]:+d} s)" if above else ")")
    )


# --- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    users: int
    wait_ms: int
    ramp_s: float | None
    steady_s: float
    after_flush_s: float
    before_kill_s: float
    down_s: float
    after_restart_s: float
    protocol: dict[str, Any]


async def run(options: Options) -> None:
    max_age_s = list_max_age_s(options.protocol)
    aged_s = max_age_s + options.wait_ms / 1000
    ramp_s = options.ramp_s if options.ramp_s is not None else aged_s
    legacy_per_s, ios = legacy_rate(options.users)
    services = [s for s in STACK if s.name in PROCESSES]
    env = {**os.environ, **free_ports_env(services), "LOG_LEVEL": "CRITICAL"}
    env["EMULATOR_DRIVER_ENABLED"] = "false"
    # the stack's own embedded Redis, never one of the machine's
    env.pop("REDIS_URL", None)
    env.pop("REDIS_CLUSTER_NODES", None)
    hold_timeout_s = options.wait_ms / 1000 * 1.2 + 15
    where = "--set" if LIST_MAX_AGE in options.protocol else "default"
    given = " ".join(f"{name}={value}" for name, value in options.protocol.items())
    print(
        f"redis_loss: {options.users} users x 3 active orders ({', '.join(STATUSES.values())}), "
        f"reference clients with wait_ms {options.wait_ms}, starts spread over {ramp_s:.0f} s; "
        f"list_max_age {max_age_s:.0f} s ({where})" + (f"; --set {given}" if given else "")
    )
    print(
        f"legacy baseline (the load test's legacy clients): every order's whole document every "
        f"5 s on iOS ({ios} users), 10 s on Android ({options.users - ios}), order sources only at "
        f"launch: {legacy_per_s:.1f} upstream calls/s in steady polling, "
        f"{legacy_per_s * PERIOD_S:.1f} per 250 ms, 0 of them source calls"
    )
    settings = {"orders_state": {"protocol": options.protocol}}
    async with own_stack(env, services, settings) as stack:
        await measure(stack, options, ramp_s, aged_s, legacy_per_s, hold_timeout_s)


async def measure(
    stack: Stack,
    options: Options,
    ramp_s: float,
    aged_s: float,
    legacy_per_s: float,
    hold_timeout_s: float,
) -> None:
    emulator, state = stack.url("emulator"), stack.url("orders_state")
    embedded = stack.redis
    assert embedded is not None, "the stack runs its own Redis"
    redis_url = stack.env["REDIS_URL"]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=60)
    ) as session:
        await post_json(session, f"{emulator}/emulator/v1/driver", {"enabled": False})
        users = [f"redis-loss-{index}" for index in range(options.users)]
        await create_orders(session, emulator, users)
        clients = [
            MlutpClient(
                session,
                launch_url=f"{stack.url('launch')}/4.0/launch",
                orders_state_url=state,
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

        sampler = Sampler(f"{emulator}/emulator/v1/stats")
        sampler.start()
        tasks = [
            asyncio.create_task(start(client, ramp_s * index / len(clients)))
            for index, client in enumerate(clients)
        ]
        try:
            await asyncio.sleep(ramp_s)
            held = await until_held(session, state, len(clients), hold_timeout_s)
            print(f"ramp done: {held:.0f} polls held; B: steady {options.steady_s:.0f} s")

            # B: steady, FLUSHALL, after it
            steady_from = await sampler.act()
            await asyncio.sleep(options.steady_s)
            reset_stats(clients)
            flush_at = await sampler.act(lambda: flushall(redis_url))
            await asyncio.sleep(options.after_flush_s)
            flush_end = await sampler.act()
            errors_b = client_errors(clients)

            # A: every poll held, SIGKILL, down, started again empty, after it
            held = await until_held(session, state, len(clients), hold_timeout_s)
            print(f"A: {held:.0f} polls held, killing Redis")
            answered = await metric_samples(session, state, "mlutp_waiting_poll_answers_total")
            reset_stats(clients)
            kill_at = await sampler.act(embedded.stop)  # SIGKILL, as a crash
            await asyncio.sleep(1.0)
            answered_after = await metric_samples(
                session, state, "mlutp_waiting_poll_answers_total"
            )
            await asyncio.sleep(max(0.0, options.down_s - 1.0))
            restart_at = await sampler.act(embedded.start)
            await asyncio.sleep(options.after_restart_s)
            a_end = await sampler.act()
            errors_a = client_errors(clients)
        finally:
            stop.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
            sampler.stop()
    failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
    causes = {
        cause: count - answered.get(cause, 0.0)
        for cause, count in sorted(answered_after.items())
        if count > answered.get(cause, 0.0)
    }
    report_a(
        sampler.windows(kill_at - options.before_kill_s, a_end),
        kill_at,
        restart_at,
        legacy_per_s,
        held,
        len(clients),
        causes,
        errors_a,
    )
    report_b(
        sampler.windows(steady_from, flush_at),
        sampler.windows(flush_at, flush_end),
        flush_at,
        ramp_s,
        aged_s,
        errors_b,
    )
    if failed:
        print(
            f"\n{len(failed)} clients stopped with an error, the first: {failed[0].exception()!r}"
        )


def parse_args(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--wait-ms", type=int, default=25_000)
    parser.add_argument(
        "--ramp",
        type=float,
        default=None,
        help="seconds the clients' starts are spread over (default: list_max_age + wait)",
    )
    parser.add_argument("--steady", type=float, default=20.0, help="B: seconds before FLUSHALL")
    parser.add_argument("--after-flush", type=float, default=120.0, help="B: seconds after it")
    parser.add_argument(
        "--before-kill", type=float, default=2.0, help="A: seconds of windows before the kill"
    )
    parser.add_argument("--down", type=float, default=10.0, help="A: seconds Redis is down")
    parser.add_argument(
        "--after-restart", type=float, default=10.0, help="A: seconds after its restart"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a protocol setting of orders_state (a JSON value); repeatable",
    )
    args = parser.parse_args(argv)
    protocol: dict[str, Any] = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name or name not in ProtocolSettings.model_fields:
            parser.error(f"--set takes NAME=VALUE of a protocol setting, not {item!r}")
        protocol[name] = json.loads(value)
    if args.users < 1 or args.down < 1.0 or args.steady <= 0 or args.after_flush <= 0:
        parser.error("--users ≥ 1, --down ≥ 1, --steady and --after-flush > 0")
    return Options(
        users=args.users,
        wait_ms=args.wait_ms,
        ramp_s=args.ramp,
        steady_s=args.steady,
        after_flush_s=args.after_flush,
        before_kill_s=args.before_kill,
        down_s=args.down,
        after_restart_s=args.after_restart,
        protocol=protocol,
    )


if __name__ == "__main__":
    uvloop.run(run(parse_args()))

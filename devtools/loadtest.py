"""`mlutp loadtest`: N simulated clients against a stack of its own, in the legacy mode and in
the new scheme, one after the other on the same order population and change profile, then a
summary table and a report (JSON and PNG plots).

Measured per phase, after a warm-up:
- heavy upstream calls (totw, eats and grocery details) per active order-minute, from the
  emulator's stats;
- downlink bytes per client-minute (response bodies);
- freshness: from a data change (the emulator's record) to the client holding that version;
- poll latency (orders/state in the new scheme, the document call in the legacy one);
- errors.
- the peak of heavy calls in any 5-s window, next to the legacy rate: the bound holds at
  every moment, not only on average.

`--fault F` adds phases of the new scheme with a fault for the middle half of the measured
time, so that its start, its middle and its end are all measured: `redis` (killed, then
started again empty), `redis_stop` (SIGSTOP, then SIGCONT), `redis_pause` (CLIENT PAUSE),
`totw` (answering 500), `source:eats` (down). Its recovery time is from the fault's end to
the first second in which orders_state saw no failure (tag cache, sources, part upstreams).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import redis.asyncio as aioredis
import uvloop
from prometheus_client.parser import text_string_to_metric_families

from client.client import ClientOptions, MlutpClient
from client.legacy import LegacyClient
from client.transport import ClientStats
from devtools.stack import Stack, free_ports_env

HEAVY_TARGETS = ("totw", "eats_details", "grocery_details")
FAULTS = ("redis", "redis_stop", "redis_pause", "totw", "source:eats")
# the faults the emulator makes: the target it sets down, and how
EMULATOR_FAULTS = {"totw": ("totw", "error500"), "source:eats": ("source:eats", "down")}
# the window in which the bound must hold at every moment
PEAK_WINDOW_S = 5
# orders_state's counters of failures it saw (labels that mean a failure), for recovery time
FAILURE_COUNTERS = {
    "mlutp_tag_cache_calls": {"outcome": {"unavailable", "circuit_open"}},
    "mlutp_order_source_calls": {"outcome": {"unavailable"}},
    "mlutp_part_upstream_orders": {"outcome": {"stale"}},
}
# changes this close to a phase's end may not be seen before it: left out of freshness
FRESHNESS_CUTOFF_S = 12.0
# the waiting clients' wait (mode mlutp_wait)
WAIT_MS = 25_000
# how often the emulator's change record is read for orders just created
CREATED_FEED_EVERY_S = 0.05


class SimulatedClient(Protocol):
    stats: ClientStats

    async def run(self, stop: asyncio.Event) -> None: ...

    def order_created(self, service: str, orderid: str, status: str) -> None: ...


@dataclass
class LoadtestConfig:
    clients: int = 100
    duration_s: float = 60.0
    warmup_s: float = 15.0
    ios_share: float = 0.5
    faults: tuple[str, ...] = ()
    # the modes of the new scheme each fault is run in
    fault_modes: tuple[str, ...] = ("mlutp", "mlutp_wait")
    # run the fault-free waiting-poll phase too
    with_wait: bool = True
    time_scale: float = 1.0
    out_dir: Path = Path("reports/loadtest")
    progress: bool = True
    seed: int = 1
    # orders_state and launch processes; the new scheme's clients take them in turn
    replicas: int = 1
    # > 0: the tags on an embedded Redis Cluster of this many masters instead of one Redis
    redis_cluster: int = 0


@dataclass
class PhaseResult:
    name: str
    clients: int
    seconds: float
    active_order_minutes: float
    heavy_calls: int
    heavy_calls_per_order_minute: float
    bytes_per_client_minute: float
    requests: int
    errors: int
    poll_latency_ms: dict[str, float]
    freshness_s: dict[str, float]
    changes_measured: int
    changes_unseen: int
    timeline: list[dict[str, float]] = field(default_factory=list)
    freshness_points: list[tuple[float, float]] = field(default_factory=list)
    # orders/state and launch requests (parts not counted) per client-minute
    polls_per_client_minute: float = 0.0
    # the most heavy calls per order-minute in any 5-s window of the phase
    peak_heavy_calls_per_order_minute: float = 0.0
    server_errors: int = 0
    fault: str | None = None
    # seconds from the fault's end to the first second orders_state saw no failure
    recovery_s: float | None = None
    # requests each orders_state replica answered in the measured part (route by route)
    requests_by_replica: list[float] = field(default_factory=list)


def peak_window_rate(timeline: list[dict[str, float]], window_s: int = PEAK_WINDOW_S) -> float:
    """The most heavy calls per order-minute in any `window_s` consecutive seconds."""
    peak = 0.0
    for start in range(max(1, len(timeline) - window_s + 1)):
        window = timeline[start : start + window_s]
        order_seconds = sum(point["active_orders"] for point in window)
        if order_seconds:
            peak = max(peak, sum(point["heavy_calls"] for point in window) / order_seconds * 60)
    return round(peak, 3)


def failures_seen(metrics_text: str) -> float:
    """The sum of orders_state's failure counters (FAILURE_COUNTERS) in a /metrics text."""
    total = 0.0
    for family in text_string_to_metric_families(metrics_text):
        wanted = FAILURE_COUNTERS.get(family.name)
        if wanted is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and all(
                sample.labels.get(label) in values for label, values in wanted.items()
            ):
                total += sample.value
    return total


async def orders_state_failures(session: aiohttp.ClientSession, stack: Stack) -> float | None:
    """The failures every orders_state replica saw, added up."""
    total = 0.0
    for url in stack.urls("orders_state"):
        try:
            async with session.get(f"{url}/metrics") as response:
                total += failures_seen(await response.text())
        except (aiohttp.ClientError, TimeoutError):
            return None
    return total


async def replica_requests(session: aiohttp.ClientSession, stack: Stack) -> list[float]:
    """The requests each orders_state replica has answered since it started."""
    counts = []
    for url in stack.urls("orders_state"):
        async with session.get(f"{url}/metrics") as response:
            text = await response.text()
        counts.append(
            sum(
                sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == "http_requests_total"
                and sample.labels.get("route", "").startswith("/mlutp/")
            )
        )
    return counts


async def start_fault(
    fault: str, stack: Stack, session: aiohttp.ClientSession, emulator: str, seconds: float
) -> None:
    server = stack.redis
    if fault in ("redis", "redis_stop", "redis_pause") and server is None:
        raise RuntimeError(f"--fault {fault} needs the stack's own Redis")
    if fault == "redis" and server is not None:
        await asyncio.to_thread(server.stop)
    elif fault == "redis_stop" and server is not None:
        server.pause()
    elif fault == "redis_pause" and server is not None:
        client = aioredis.Redis.from_url(server.url)
        try:
            await client.client_pause(int(seconds * 1000))
        finally:
            await client.aclose()
    else:
        target, mode = EMULATOR_FAULTS[fault]
        await set_fault(session, emulator, target, mode)


async def end_fault(
    fault: str, stack: Stack, session: aiohttp.ClientSession, emulator: str
) -> None:
    server = stack.redis
    if fault == "redis" and server is not None:
        await asyncio.to_thread(server.start)
    elif fault == "redis_stop" and server is not None:
        server.resume()
    elif fault == "redis_pause":
        pass  # CLIENT PAUSE ends by itself
    else:
        target, _ = EMULATOR_FAULTS[fault]
        await set_fault(session, emulator, target, "ok")


def percentiles(values: list[float], scale: float = 1.0) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * scale, 3)

    return {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99)}


class VersionLog:
    """When each client first held each version of each order."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)

    def record(self, service: str, orderid: str, version: int, at: float) -> None:
        self.seen[(service, orderid)].append((version, at))

    def first_seen(self, service: str, orderid: str, version: int, after: float) -> float | None:
        for seen_version, at in self.seen.get((service, orderid), ()):
            if seen_version >= version and at >= after:
                return at
        return None


async def emulator_get(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url) as response:
        result: dict[str, Any] = await response.json()
        return result


async def feed_created_orders(
    session: aiohttp.ClientSession,
    emulator: str,
    clients: dict[str, SimulatedClient],
    stop: asyncio.Event,
) -> None:
    """A user who creates an order has its id in the app at once: tell the user's simulated
    client of each order the emulator's driver creates, as it is created."""
    changes = await emulator_get(session, f"{emulator}/emulator/v1/changes?since=0")
    seq = changes["changes"][-1]["seq"] if changes["changes"] else 0
    while not stop.is_set():
        # the change record is another process's: read it again, there is no event to await
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), CREATED_FEED_EVERY_S)
        try:
            changes = await emulator_get(session, f"{emulator}/emulator/v1/changes?since={seq}")
        except (aiohttp.ClientError, TimeoutError):
            continue  # the emulator is busy: the next read catches up
        for change in changes["changes"]:
            seq = change["seq"]
            client = clients.get(change["user_id"])
            if change["created"] and client is not None:
                client.order_created(change["service"], change["orderid"], change["status"])


async def set_fault(session: aiohttp.ClientSession, emulator: str, target: str, mode: str) -> None:
    async with session.post(
        f"{emulator}/emulator/v1/faults", json={"target": target, "mode": mode}
    ) as response:
        response.raise_for_status()


def make_clients(
    mode: str, stack: Stack, session: aiohttp.ClientSession, config: LoadtestConfig, log: VersionLog
) -> dict[str, SimulatedClient]:
    """One simulated client per user, by user id."""
    rng = random.Random(config.seed)
    launch_url = f"{stack.url('launch')}/4.0/launch"
    emulator = stack.url("emulator")
    clients: dict[str, SimulatedClient] = {}
    for index in range(config.clients):
        user = f"demo-user-{index + 1}"
        if mode == "legacy":
            ios = rng.random() < config.ios_share
            clients[user] = LegacyClient(
                session,
                launch_url=launch_url,
                user_id=user,
                period_s=5.0 if ios else 10.0,
                document_urls={
                    "taxi": f"{stack.url('orders_state')}/3.0/taxiontheway",
                    "eats": f"{emulator}/eats/v1/orders/details",
                    "grocery": f"{emulator}/grocery/v1/orders/details",
                },
                on_version_seen=log.record,
            )
        else:
            wait_ms = WAIT_MS if mode == "mlutp_wait" else 0
            clients[user] = MlutpClient(
                session,
                # client-side round robin over the replicas (one URL each without them)
                launch_url=[f"{url}/4.0/launch" for url in stack.urls("launch")],
                orders_state_url=stack.urls("orders_state"),
                user_id=user,
                options=ClientOptions(poll_route=False, wait_ms=wait_ms),
                on_version_seen=log.record,
                rng=random.Random(config.seed + index),
            )
    return clients


async def run_phase(
    name: str,
    mode: str,
    fault: str | None,
    stack: Stack,
    session: aiohttp.ClientSession,
    config: LoadtestConfig,
    tick: Any,
) -> PhaseResult:
    emulator = stack.url("emulator")
    log = VersionLog()
    by_user = make_clients(mode, stack, session, config, log)
    clients = list(by_user.values())
    stop = asyncio.Event()

    async def start(client: SimulatedClient, delay: float) -> None:
        await asyncio.sleep(delay)  # apps start at different moments
        await client.run(stop)

    spread = min(config.warmup_s, 5.0)
    tasks = [
        asyncio.create_task(start(c, spread * i / max(1, len(clients))))
        for i, c in enumerate(clients)
    ]
    tasks.append(asyncio.create_task(feed_created_orders(session, emulator, by_user, stop)))
    try:
        for _ in range(int(config.warmup_s)):
            await asyncio.sleep(1)
            tick()
        # the measured part starts here
        for client in clients:
            client.stats = ClientStats()
        # a fault for the middle half: its start, middle and end are all measured
        fault_from = int(config.duration_s / 4)
        fault_until = int(config.duration_s * 3 / 4)
        faulty = False
        failures: list[float | None] = []
        stats0 = await emulator_get(session, f"{emulator}/emulator/v1/stats")
        replicas0 = await replica_requests(session, stack)
        changes0 = await emulator_get(session, f"{emulator}/emulator/v1/changes?since=0")
        seq0 = changes0["changes"][-1]["seq"] if changes0["changes"] else 0
        started = time.time()
        timeline: list[dict[str, float]] = []
        previous = stats0
        active_order_seconds = 0.0
        for second in range(int(config.duration_s)):
            if fault is not None and second == fault_from:
                await start_fault(fault, stack, session, emulator, fault_until - fault_from)
                faulty = True
            elif fault is not None and second == fault_until:
                await end_fault(fault, stack, session, emulator)
                faulty = False
            await asyncio.sleep(1)
            tick()
            if fault is not None:
                failures.append(await orders_state_failures(session, stack))
            stats = await emulator_get(session, f"{emulator}/emulator/v1/stats")
            heavy = sum(
                stats["calls"].get(t, 0) - previous["calls"].get(t, 0) for t in HEAVY_TARGETS
            )
            active_order_seconds += stats["active_orders"]
            timeline.append(
                {"t": second + 1, "heavy_calls": heavy, "active_orders": stats["active_orders"]}
            )
            previous = stats
        ended = time.time()
        by_replica = [
            after - before
            for before, after in zip(replicas0, await replica_requests(session, stack), strict=True)
        ]
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        if fault is not None and faulty:
            await end_fault(fault, stack, session, emulator)

    heavy_calls = sum(
        previous["calls"].get(t, 0) - stats0["calls"].get(t, 0) for t in HEAVY_TARGETS
    )
    order_minutes = active_order_seconds / 60
    changes = (await emulator_get(session, f"{emulator}/emulator/v1/changes?since={seq0}"))[
        "changes"
    ]
    delays: list[float] = []
    points: list[tuple[float, float]] = []
    unseen = 0
    for change in changes:
        if change["at"] > ended - FRESHNESS_CUTOFF_S:
            continue
        seen = log.first_seen(
            change["service"], change["orderid"], change["version"], change["at"] - 1
        )
        if seen is None:
            unseen += 1
            continue
        delay = max(0.0, seen - change["at"])
        delays.append(delay)
        points.append((round(change["at"] - started, 3), round(delay, 3)))
    seconds = ended - started
    latencies = [lat for c in clients for lat in c.stats.poll_latencies]
    recovery_s: float | None = None
    if fault is not None:
        # failures[i]: orders_state's failure count at the end of second i + 1
        for second in range(fault_until, len(failures)):
            before = failures[second - 1]
            now = failures[second]
            if before is not None and now is not None and now == before:
                recovery_s = float(second - fault_until + 1)
                break
    return PhaseResult(
        name=name,
        clients=len(clients),
        seconds=round(seconds, 1),
        active_order_minutes=round(order_minutes, 2),
        heavy_calls=heavy_calls,
        heavy_calls_per_order_minute=round(heavy_calls / order_minutes, 3) if order_minutes else 0,
        bytes_per_client_minute=round(
            sum(c.stats.bytes_received for c in clients) / (len(clients) * seconds / 60), 1
        ),
        requests=sum(c.stats.requests for c in clients),
        polls_per_client_minute=round(
            sum(len(c.stats.poll_latencies) for c in clients) / (len(clients) * seconds / 60), 2
        ),
        errors=sum(c.stats.errors for c in clients),
        poll_latency_ms=percentiles(latencies, 1000),
        freshness_s=percentiles(delays),
        changes_measured=len(delays),
        changes_unseen=unseen,
        timeline=timeline,
        freshness_points=points,
        peak_heavy_calls_per_order_minute=peak_window_rate(timeline),
        server_errors=sum(c.stats.server_errors for c in clients),
        fault=fault,
        recovery_s=recovery_s,
        requests_by_replica=by_replica,
    )


def _ratio(new: float, legacy: float) -> float | None:
    """new ÷ legacy, or None when the legacy phase measured nothing to compare with."""
    return round(new / legacy, 3) if legacy > 0 else None


def ratios(phases: dict[str, PhaseResult]) -> dict[str, float | None]:
    legacy = phases["legacy"]
    result: dict[str, float | None] = {}
    for mode, prefix in (("mlutp", ""), ("mlutp_wait", "wait_")):
        if mode not in phases:
            continue
        new = phases[mode]
        result[f"{prefix}heavy_calls_per_order_minute"] = _ratio(
            new.heavy_calls_per_order_minute, legacy.heavy_calls_per_order_minute
        )
        result[f"{prefix}bytes_per_client_minute"] = _ratio(
            new.bytes_per_client_minute, legacy.bytes_per_client_minute
        )
        result[f"{prefix}freshness_p95"] = _ratio(new.freshness_s["p95"], legacy.freshness_s["p95"])
    for name in ("mlutp_redis_down", "mlutp_wait_redis_down"):
        if name in phases:
            result[f"{name.removeprefix('mlutp_')}_heavy_calls_per_order_minute"] = _ratio(
                phases[name].heavy_calls_per_order_minute, legacy.heavy_calls_per_order_minute
            )
    # every phase's worst 5-s window against the legacy rate: at most 1 at every moment
    for name, phase in phases.items():
        if name != "legacy":
            result[f"{name}_peak_5s"] = _ratio(
                phase.peak_heavy_calls_per_order_minute, legacy.heavy_calls_per_order_minute
            )
    return result


def summary_table(phases: dict[str, PhaseResult], ratio: dict[str, float | None]) -> str:
    header = (
        f"{'phase':<24}{'heavy/order-min':>16}{'bytes/client-min':>18}{'fresh p50':>11}"
        f"{'p95':>8}{'p99':>8}{'poll p50 ms':>13}{'p99 ms':>9}{'polls/cl-min':>14}"
        f"{'errors':>8}{'5xx':>6}{'peak 5s':>9}{'recovery s':>12}"
    )
    lines = [header, "-" * len(header)]
    for phase in phases.values():
        lines.append(
            f"{phase.name:<24}{phase.heavy_calls_per_order_minute:>16.2f}"
            f"{phase.bytes_per_client_minute:>18.0f}{phase.freshness_s['p50']:>11.2f}"
            f"{phase.freshness_s['p95']:>8.2f}{phase.freshness_s['p99']:>8.2f}"
            f"{phase.poll_latency_ms['p50']:>13.1f}{phase.poll_latency_ms['p99']:>9.1f}"
            f"{phase.polls_per_client_minute:>14.2f}{phase.errors:>8}"
            f"{phase.server_errors:>6}{phase.peak_heavy_calls_per_order_minute:>9.2f}"
            f"{'' if phase.recovery_s is None else f'{phase.recovery_s:.0f}':>12}"
        )
    lines.append("")
    goals = {
        "heavy_calls_per_order_minute": "goal <= 0.2",
        "bytes_per_client_minute": "goal <= 0.1",
        "freshness_p95": "goal <= 1.0",
        "wait_heavy_calls_per_order_minute": "goal <= the mlutp figure",
        "wait_bytes_per_client_minute": "goal <= 0.05",
        "wait_freshness_p95": "absolute goal: p95 <= 1.0 s, p50 <= 0.3 s",
        "redis_down_heavy_calls_per_order_minute": "goal <= 1.0",
        "wait_redis_down_heavy_calls_per_order_minute": "goal <= 1.0",
    }
    for key, value in ratio.items():
        shown = f"{value:>7.3f}" if value is not None else "    n/a"
        goal = goals.get(key, "goal <= 1.0: the legacy rate, in the worst 5-s window")
        lines.append(f"new / legacy {key:<42} {shown}   ({goal})")
    return "\n".join(lines)


def write_plots(phases: dict[str, PhaseResult], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def plot(name: str, title: str, xlabel: str, ylabel: str, draw: Callable[[Any], bool]) -> str:
        figure, axis = plt.subplots(figsize=(9, 4.5))
        if draw(axis):  # True when something labelled was drawn
            axis.legend()
        axis.set(title=title, xlabel=xlabel, ylabel=ylabel)
        figure.tight_layout()
        figure.savefig(out_dir / name, dpi=100)
        plt.close(figure)
        return name

    def upstream_load(axis: Any) -> bool:
        for phase in phases.values():
            xs = [p["t"] for p in phase.timeline]
            ys = [p["heavy_calls"] / max(p["active_orders"], 1) * 60 for p in phase.timeline]
            axis.plot(xs, ys, label=phase.name, linewidth=1)
        return bool(phases)

    def freshness(axis: Any) -> bool:
        drawn = [phase for phase in phases.values() if phase.freshness_points]
        for phase in drawn:
            axis.scatter(
                [at for at, _ in phase.freshness_points],
                [delay for _, delay in phase.freshness_points],
                s=4,
                alpha=0.5,
                label=phase.name,
            )
        return bool(drawn)

    return [
        plot(
            "upstream_load.png",
            "Upstream load (totw + details)",
            "seconds into the measured phase",
            "heavy upstream calls per order-minute",
            upstream_load,
        ),
        plot(
            "freshness.png",
            "Freshness",
            "time of the data change, seconds into the phase",
            "seconds until the client held it",
            freshness,
        ),
    ]


async def run_loadtest(config: LoadtestConfig) -> dict[str, Any]:
    from tqdm import tqdm

    env: dict[str, str] = dict(os.environ)
    env.pop("REDIS_URL", None)  # a Redis of its own, so that --fault redis harms nobody
    env.pop("REDIS_CLUSTER_NODES", None)
    env.update(free_ports_env())
    env.update(
        {
            "LOG_LEVEL": "ERROR",
            "EMULATOR_DRIVER_ENABLED": "true",
            "EMULATOR_DRIVER_POPULATION": str(config.clients),
            "EMULATOR_DRIVER_TIME_SCALE": str(config.time_scale),
        }
    )
    plan: list[tuple[str, str, str | None]] = [
        ("legacy", "legacy", None),
        ("mlutp", "mlutp", None),
    ]
    if config.with_wait:
        plan.append(("mlutp_wait", "mlutp_wait", None))
    for fault_name in config.faults:
        for mode in config.fault_modes:
            plan.append((f"{mode}_{fault_name.replace(':', '_')}_down", mode, fault_name))
    total = int(len(plan) * (config.warmup_s + config.duration_s))
    stack = Stack(env, replicas=config.replicas, redis_cluster_masters=config.redis_cluster)
    phases: dict[str, PhaseResult] = {}
    connector = aiohttp.TCPConnector(limit=0)
    with tqdm(total=total, unit="s", disable=not config.progress, file=sys.stderr) as bar:
        try:
            await stack.start()
            async with aiohttp.ClientSession(connector=connector) as session:
                for name, mode, fault in plan:
                    bar.set_description(name)
                    phases[name] = await run_phase(
                        name, mode, fault, stack, session, config, lambda: bar.update(1)
                    )
        finally:
            await stack.close()
    ratio = ratios(phases)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(phases, config.out_dir)
    report = {
        "config": {**asdict(config), "out_dir": str(config.out_dir)},
        "profile": "EMULATOR_DRIVER_* defaults (README: the change profile)",
        "phases": {name: asdict(phase) for name, phase in phases.items()},
        "ratios_new_over_legacy": ratio,
        "plots": plots,
    }
    (config.out_dir / "report.json").write_text(json.dumps(report, indent=2))
    print(summary_table(phases, ratio))
    print(f"\nreport: {config.out_dir / 'report.json'}, plots: {', '.join(plots)}")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=100, help="simulated clients (users)")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=15.0, help="unmeasured seconds per phase")
    parser.add_argument(
        "--ios-share",
        type=float,
        default=0.5,
        help="legacy clients polling every 5 s; the rest every 10 s",
    )
    parser.add_argument(
        "--fault",
        action="append",
        choices=FAULTS,
        default=[],
        help="add a phase of the new scheme with this fault",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="run the change profile this many times faster",
    )
    parser.add_argument(
        "--fault-modes",
        default="mlutp,mlutp_wait",
        help="the modes each fault is run in (comma-separated: mlutp, mlutp_wait)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="orders_state and launch processes each; the new scheme's clients take them in turn",
    )
    parser.add_argument(
        "--redis-cluster",
        type=int,
        default=0,
        metavar="MASTERS",
        help="run the tags on an embedded Redis Cluster of this many masters (0: one Redis)",
    )
    parser.add_argument("--out", type=Path, default=None, help="report folder")
    parser.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    out = args.out or Path("reports") / time.strftime("loadtest-%Y%m%d-%H%M%S")
    config = LoadtestConfig(
        clients=args.clients,
        duration_s=args.duration,
        warmup_s=args.warmup,
        ios_share=args.ios_share,
        faults=tuple(args.fault),
        fault_modes=tuple(mode for mode in args.fault_modes.split(",") if mode),
        time_scale=args.time_scale,
        out_dir=out,
        progress=not args.no_progress,
        replicas=args.replicas,
        redis_cluster=args.redis_cluster,
    )
    if config.redis_cluster and any(f.startswith("redis") for f in config.faults):
        print("--fault redis* acts on one Redis: not with --redis-cluster", file=sys.stderr)
        return 2
    if config.replicas < 1:
        print("--replicas must be at least 1", file=sys.stderr)
        return 2
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    with runner:
        runner.run(run_loadtest(config))
    return 0

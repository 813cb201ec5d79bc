"""One phase: the simulated clients of a mode (legacy, mlutp, mlutp_wait) run on the stack
for a warm-up and a measured time, under a fault for the middle half if there is one, and
what it cost and how fresh the clients were."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import aiohttp

from client.client import MlutpClient
from client.legacy import LegacyClient
from client.model import ClientOptions
from client.transport import ClientStats
from client.wire_bytes import wire_totals
from devtools.loadtest.config import (
    FRESHNESS_CUTOFF_S,
    HEAVY_TARGETS,
    PART_SERVICE_TARGETS,
    PERFORMER_TARGET,
    WAIT_MS,
    LoadtestConfig,
    PhaseResult,
    priced_target,
)
from devtools.loadtest.faults import FAULT_KINDS, FaultTarget
from devtools.loadtest.measure import (
    SOURCE_CALL_CAUSES,
    SimulatedClient,
    SourceCallCauses,
    VersionLog,
    created_elsewhere,
    emulator_get,
    feed_created_orders,
    gap_summary,
    orders_state_failures,
    peak_window_rate,
    percentiles,
    replica_requests,
)
from devtools.stack import Stack


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
    injected = FAULT_KINDS[fault] if fault is not None else None
    target = FaultTarget(stack, session)
    log = VersionLog()
    by_user = make_clients(mode, stack, session, config, log)
    clients = list(by_user.values())
    stop = asyncio.Event()

    async def start(client: SimulatedClient, delay: float) -> None:
        await asyncio.sleep(delay)  # apps start at different moments
        await client.run(stop)

    spread = min(config.warmup_s, config.start_spread_s)
    tasks = [
        asyncio.create_task(start(c, spread * i / max(1, len(clients))))
        for i, c in enumerate(clients)
    ]
    tasks.append(
        asyncio.create_task(
            feed_created_orders(session, emulator, by_user, stop, config.created_elsewhere)
        )
    )
    # each source call's cause is told from the same user's previous call, so the calls are
    # followed from the phase's start: the warm-up's are not counted
    causes = SourceCallCauses(config.list_max_age_s)
    try:
        followed = await emulator_get(session, f"{emulator}/emulator/v1/stats")
        for _ in range(int(config.warmup_s)):
            await asyncio.sleep(1)
            tick()
            stats = await emulator_get(session, f"{emulator}/emulator/v1/stats")
            causes.read(followed, stats, time.time())
            followed = stats
        # the measured part starts here
        for client in clients:
            client.stats = ClientStats()
        # a fault for the middle half: its start, middle and end are all measured
        fault_from = int(config.duration_s / 4)
        fault_until = int(config.duration_s * 3 / 4)
        faulty = False
        failures: list[float | None] = []
        stats0 = await emulator_get(session, f"{emulator}/emulator/v1/stats")
        causes.read(followed, stats0, time.time())
        causes.counting = True
        replicas0 = await replica_requests(session, stack)
        changes0 = await emulator_get(session, f"{emulator}/emulator/v1/changes?since=0")
        seq0 = changes0["changes"][-1]["seq"] if changes0["changes"] else 0
        started = time.time()
        timeline: list[dict[str, float]] = []
        previous = stats0
        active_order_seconds = 0.0
        sampled = started
        for second in range(int(config.duration_s)):
            if injected is not None and second == fault_from:
                await injected.start(target, fault_until - fault_from)
                faulty = True
            elif injected is not None and second == fault_until:
                await injected.end(target)
                faulty = False
            await asyncio.sleep(1)
            tick()
            if fault is not None:
                failures.append(await orders_state_failures(session, stack))
            stats = await emulator_get(session, f"{emulator}/emulator/v1/stats")
            causes.read(previous, stats, time.time())
            heavy = sum(
                stats["calls"].get(t, 0) - previous["calls"].get(t, 0) for t in HEAVY_TARGETS
            )
            # the seconds this sample stands for: on a loaded machine the loop's second
            # stretches, and the calls counted are those of the longer time
            at = time.time()
            active_order_seconds += stats["active_orders"] * (at - sampled)
            sampled = at
            performer = stats["calls"].get(PERFORMER_TARGET, 0) - previous["calls"].get(
                PERFORMER_TARGET, 0
            )
            sample = {
                "t": second + 1,
                "heavy_calls": heavy,
                "totw_calls": stats["calls"].get("totw", 0) - previous["calls"].get("totw", 0),
                "performer_calls": performer,
                "active_orders": stats["active_orders"],
            }
            for service in PART_SERVICE_TARGETS:
                sample[service] = stats["calls"].get(service, 0) - previous["calls"].get(service, 0)
            timeline.append(sample)
            previous = stats
        ended = time.time()
        by_replica = [
            after - before
            for before, after in zip(replicas0, await replica_requests(session, stack), strict=True)
        ]
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        if injected is not None and faulty:
            await injected.end(target)

    heavy_calls = sum(
        previous["calls"].get(t, 0) - stats0["calls"].get(t, 0) for t in HEAVY_TARGETS
    )
    totw_calls = previous["calls"].get("totw", 0) - stats0["calls"].get("totw", 0)
    source_calls = sum(
        count - stats0["calls"].get(target, 0)
        for target, count in previous["calls"].items()
        if target.startswith("source:")
    )
    order_minutes = active_order_seconds / 60

    def made(counter: str) -> dict[str, int]:
        """What each priced upstream's counter grew by in the measured part."""
        grown = {
            target: count - stats0.get(counter, {}).get(target, 0)
            for target, count in previous.get(counter, {}).items()
            if priced_target(target)
        }
        return {target: n for target, n in grown.items() if n}

    work = made("work")
    part_calls = sum(n for target, n in made("calls").items() if target != "taxiroute")
    changes = (await emulator_get(session, f"{emulator}/emulator/v1/changes?since={seq0}"))[
        "changes"
    ]
    delays: list[float] = []
    elsewhere_delays: list[float] = []
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
        if change["created"] and created_elsewhere(change["orderid"], config.created_elsewhere):
            elsewhere_delays.append(delay)
        points.append((round(change["at"] - started, 3), round(delay, 3)))
    seconds = ended - started
    client_minutes = len(clients) * seconds / 60
    wire = sum((c.stats.wire for c in clients), Counter[str]())
    by_exchange = sum((c.stats.wire_by_exchange for c in clients), Counter[str]())
    exchanges = sum((c.stats.exchanges for c in clients), Counter[str]())
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
        totw_calls_per_order_minute=round(totw_calls / order_minutes, 3) if order_minutes else 0,
        peak_totw_calls_per_order_minute=peak_window_rate(timeline, calls="totw_calls"),
        work_per_order_minute=round(sum(work.values()) / order_minutes, 1) if order_minutes else 0,
        work_per_order_minute_by_upstream={
            target: round(units / order_minutes, 1)
            for target, units in sorted(work.items(), key=lambda item: -item[1])
            if order_minutes
        },
        part_calls_per_order_minute=round(part_calls / order_minutes, 3) if order_minutes else 0,
        peak_performer_calls_per_order_minute=peak_window_rate(timeline, calls="performer_calls"),
        peak_part_service_calls_per_order_minute=max(
            peak_window_rate(timeline, calls=service) for service in PART_SERVICE_TARGETS
        ),
        server_errors=sum(c.stats.server_errors for c in clients),
        fault=fault,
        recovery_s=recovery_s,
        requests_by_replica=by_replica,
        source_calls_per_client_minute=round(source_calls / (len(clients) * seconds / 60), 3),
        source_calls_per_client_minute_by_cause={
            cause: round(causes.causes[cause] / client_minutes, 3)
            for cause in SOURCE_CALL_CAUSES
            if causes.causes[cause]
        },
        past_max_age_gap_s=gap_summary(causes.past_max_age_gaps),
        bytes_per_client_minute_by_path={
            path: round(size / (len(clients) * seconds / 60), 1)
            for path, size in sum(
                (c.stats.bytes_by_path for c in clients), Counter[str]()
            ).most_common()
        },
        created_elsewhere_freshness_s=percentiles(elsewhere_delays) if elsewhere_delays else {},
        created_elsewhere_measured=len(elsewhere_delays),
        wire_bytes_per_client_minute={
            kind: round(size / client_minutes, 1) for kind, size in wire_totals(wire).items()
        },
        wire_bytes_per_client_minute_by_exchange={
            exchange: round(size / client_minutes, 1)
            for exchange, size in by_exchange.most_common()
        },
        exchanges_per_client_minute={
            exchange: round(count / client_minutes, 2) for exchange, count in exchanges.items()
        },
    )

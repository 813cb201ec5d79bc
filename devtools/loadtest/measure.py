"""What a phase reads off the stack: the emulator's stats and change record, orders_state's
metrics (failures, requests per replica), when each client held each version, percentiles
and the busiest window."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import defaultdict
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from client.transport import ClientStats
from devtools.loadtest.config import PEAK_WINDOW_S
from devtools.stack import Stack

# orders_state's counters of failures it saw (labels that mean a failure), for recovery time
FAILURE_COUNTERS = {
    "mlutp_tag_cache_calls": {"outcome": {"unavailable", "circuit_open"}},
    "mlutp_order_source_calls": {"outcome": {"unavailable"}},
    "mlutp_part_upstream_orders": {"outcome": {"stale"}},
}
# how often the emulator's change record is read for orders just created
CREATED_FEED_EVERY_S = 0.05


class SimulatedClient(Protocol):
    stats: ClientStats

    async def run(self, stop: asyncio.Event) -> None: ...

    def order_created(self, service: str, orderid: str, status: str) -> None: ...


def peak_window_rate(
    timeline: list[dict[str, float]], window_s: int = PEAK_WINDOW_S, calls: str = "heavy_calls"
) -> float:
    """The most `calls` (heavy ones by default) per order-minute in any `window_s`
    consecutive seconds."""
    peak = 0.0
    for start in range(max(1, len(timeline) - window_s + 1)):
        window = timeline[start : start + window_s]
        order_seconds = sum(point["active_orders"] for point in window)
        if order_seconds:
            peak = max(peak, sum(point.get(calls, 0) for point in window) / order_seconds * 60)
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


def created_elsewhere(orderid: str, share: float) -> bool:
    """Whether the order was created on another device: the same answer in every process and
    run for an id, for `share` of the ids."""
    return share > 0 and int(hashlib.sha256(orderid.encode()).hexdigest()[:8], 16) < share * 2**32


async def feed_created_orders(
    session: aiohttp.ClientSession,
    emulator: str,
    clients: dict[str, SimulatedClient],
    stop: asyncio.Event,
    elsewhere_share: float = 0.0,
) -> None:
    """A user who creates an order has its id in the app at once: tell the user's simulated
    client of each order the emulator's driver creates, as it is created, except those
    created on another device (`elsewhere_share` of them), which it must learn by polling."""
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
            if (
                change["created"]
                and client is not None
                and not created_elsewhere(change["orderid"], elsewhere_share)
            ):
                client.order_created(change["service"], change["orderid"], change["status"])

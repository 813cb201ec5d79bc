"""What a phase reads off the stack: the emulator's stats and change record, orders_state's
metrics (failures, requests per replica), when each client held each version, why each order
source call was made, percentiles and the busiest window."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import Counter, defaultdict
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
# a kept answer's own age limit is drawn from this share of list_max_age up to all of it
# (docs/protocol.md: List tags): an unchanged list asked again sooner was not asked for its age
KEPT_AGE_SPREAD_FROM = 0.75
# the causes SourceCallCauses tells apart, in the order a report shows them
SOURCE_CALL_CAUSES = (
    "first",
    "list_changed",
    "past_max_age",
    "unchanged_early",
    "no_list_tag",
    "unseen",
)


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


class SourceCallCauses:
    """Why each order source call was made, from what the BFF told the source: the list tag
    it read before asking (`at_least`, docs/protocol.md: What upstreams receive) against the
    one of the same user's previous call to that source that had one.

    - `first`: the user's first call to that source seen (its launch, or a list tag that was
      not read in this phase yet);
    - `list_changed`: another list tag than the previous call's: the list changed (an order
      created, here or elsewhere, a status, a brief field, an order finished), or the tag was
      lost and made anew;
    - `past_max_age`: the same tag, at least 0.75 of `list_max_age` (less one second, the
      reading's step) after the previous call: the kept answer had passed its own age limit;
    - `unchanged_early`: the same tag, sooner: the kept answer was not there (not kept yet, a
      coalescing miss, a lagging answer, a keep that failed);
    - `no_list_tag`: asked with no list tag (the tag store unavailable, or list tags off);
    - `unseen`: past the emulator's record of the last calls (50 a source) between two reads.

    The emulator's stats are read once a second, so each call's time is its read's."""

    def __init__(self, list_max_age_s: float) -> None:
        self.early_before_s = KEPT_AGE_SPREAD_FROM * list_max_age_s - 1.0
        self.counting = False
        self.causes: Counter[str] = Counter()
        # seconds from the previous call with the same list tag, of the `past_max_age` calls
        self.past_max_age_gaps: list[float] = []
        self._last: dict[tuple[str, str], tuple[str | None, float]] = {}

    def read(self, before: dict[str, Any], after: dict[str, Any], at: float) -> None:
        """The source calls between two readings of the emulator's stats, made by `at`."""
        for target, count in after["calls"].items():
            if not target.startswith("source:"):
                continue
            new = count - before["calls"].get(target, 0)
            if new <= 0:
                continue
            recorded = after.get("recent", {}).get(target, [])[-new:]
            if self.counting and len(recorded) < new:
                self.causes["unseen"] += new - len(recorded)
            for call in recorded:
                self._one(target, call, at)

    def _one(self, target: str, call: dict[str, Any], at: float) -> None:
        user = call.get("headers", {}).get("X-Yandex-UID", "")
        body = call.get("body")
        tag = body.get("at_least") if isinstance(body, dict) else None
        previous = self._last.get((target, user))
        if tag is None:
            # the next call with a tag is told by the last one with a tag: after the tag
            # store is back, an unchanged list is not a changed one
            cause = "no_list_tag"
        elif previous is None:
            cause = "first"
        elif previous[0] != tag:
            cause = "list_changed"
        elif at - previous[1] >= self.early_before_s:
            cause = "past_max_age"
            if self.counting:
                self.past_max_age_gaps.append(at - previous[1])
        else:
            cause = "unchanged_early"
        if tag is not None:
            self._last[(target, user)] = (tag, at)
        if self.counting:
            self.causes[cause] += 1


def gap_summary(gaps: list[float]) -> dict[str, float]:
    """p50, p95 and mean of the seconds between re-asks of an unchanged list ({} with none)."""
    if not gaps:
        return {}
    summary = percentiles(gaps)
    summary["mean"] = round(sum(gaps) / len(gaps), 1)
    return {"p50": summary["p50"], "p95": summary["p95"], "mean": summary["mean"]}


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

"""The waiting polls' metrics of an orders_state app under test, each write told to a test
awaiting a value: a test double around the gauges and counters the service exports, so a test
observes what /metrics shows (polls held, pub/sub up, connections lost, channels subscribed)
and awaits a change as an event, never a sleep."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

from aiohttp.test_utils import TestClient

from services.orders_state.waiting.metrics import WaitingMetrics
from services.orders_state.waiting.setup import WAITING
from shared.web import METRICS


class _Told:
    """One metric (or one labelled child of it), telling `changed` of every write."""

    def __init__(self, metric: Any, changed: asyncio.Event) -> None:
        self._metric = metric
        self._changed = changed

    def inc(self, amount: float = 1) -> None:
        self._metric.inc(amount)
        self._changed.set()

    def dec(self, amount: float = 1) -> None:
        self._metric.dec(amount)
        self._changed.set()

    def set(self, value: float) -> None:
        self._metric.set(value)
        self._changed.set()

    def labels(self, *values: str, **labels: str) -> _Told:
        return _Told(self._metric.labels(*values, **labels), self._changed)


class ToldMetrics:
    def __init__(self, client: TestClient) -> None:
        self.registry = client.app[METRICS].registry
        self.changed = asyncio.Event()
        metrics = client.app[WAITING].metrics
        for name, metric in list(vars(metrics).items()):
            setattr(metrics, name, _Told(metric, self.changed))

    def value(self, name: str, **labels: str) -> float:
        """A sample's value as /metrics shows it (0 for a sample not there yet)."""
        return self.registry.get_sample_value(name, labels) or 0.0

    async def until(self, predicate: Callable[[ToldMetrics], bool], timeout_s: float = 30) -> None:
        """Until `predicate(self)` holds, checked at each write of a waiting metric."""
        async with asyncio.timeout(timeout_s):
            while not predicate(self):
                self.changed.clear()
                await self.changed.wait()


_TOLD: weakref.WeakKeyDictionary[WaitingMetrics, ToldMetrics] = weakref.WeakKeyDictionary()


def told_metrics(client: TestClient) -> ToldMetrics:
    """The waiting metrics of this orders_state app, told (wrapped at the first call)."""
    metrics = client.app[WAITING].metrics
    told = _TOLD.get(metrics)
    if told is None:
        told = _TOLD[metrics] = ToldMetrics(client)
    return told

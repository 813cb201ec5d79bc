"""The tag cache as the BFF sees it: order_tags behind a deadline and a circuit breaker,
so a dead cache costs nothing per request. `None` means unavailable: callers degrade."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from services.bff.metrics import BffMetrics
from services.bff.ports import TagStore
from shared.errors import OrderTagsRejected, OrderTagsUnavailable
from shared.protocol.circuit import CircuitBreaker
from shared.protocol.need_request import CACHE_UP, CacheState
from shared.wire import (
    MAX_BATCH,
    ForcedOrder,
    KeptAnswerOut,
    ListEntry,
    ListKey,
    OrderKey,
    OrderParts,
)

StoredTags = dict[OrderKey, dict[str, str] | None]


@dataclass
class TagsRead:
    """One read of the tag cache: the orders' tags, when each order's first tag was written,
    and each queried service's list entry (its list tag, its kept answer)."""

    tags: StoredTags
    created_ms: dict[OrderKey, int]
    lists: dict[str, ListEntry]
    # whose order each is, where its first writer said
    owners: dict[OrderKey, str] = field(default_factory=dict)
    # the forced orders whose force counts: within their budget, counted by every replica
    force_honoured: set[OrderKey] = field(default_factory=set)
    # when a create last made any of each order's tags (new, or lost)
    made_ms: dict[OrderKey, int] = field(default_factory=dict)


T = TypeVar("T")


def batched(items: Sequence[T], size: int) -> list[Sequence[T]]:
    # itertools.batched is Python 3.12; the project runs on 3.11
    return [items[start : start + size] for start in range(0, len(items), size)]


class TagCache:
    def __init__(
        self,
        client: TagStore,
        circuit: CircuitBreaker,
        metrics: BffMetrics,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.circuit = circuit
        self.metrics = metrics
        self.clock = clock
        self.wall_clock = wall_clock
        # unix ms of the first failure since the cache last answered: the outage's start,
        # from which degraded refetches are spread
        self.unavailable_since_ms: int | None = None
        # unix ms of the last read order_tags answered: a waiting re-poll held from a kept
        # look reads no tags, so the watch cache asks how long the cache has gone unheard
        # (shared.protocol.waiting.kept_look_holds)
        self.read_at_ms: int | None = None
        # the failed calls the circuit has counted: a joined call's failure reaches each poll
        # joined in it as one exception, and counts once, so "failures in a row" are calls,
        # not polls (else one lost call of five polls opened the circuit for everyone)
        self._failures_counted: weakref.WeakSet[BaseException] = weakref.WeakSet()

    @property
    def available(self) -> bool:
        """The cache is not found down (its circuit is closed): a poll held on its last look
        may go on waiting. One failed call is not "down": a poll woken by real news then would
        answer its last look, with no news, and the news would wait a degraded interval."""
        return not self.circuit.is_open

    def state(self, stored: StoredTags | None) -> CacheState:
        """What a poll that read `stored` knows of the cache."""
        if stored is not None:
            return CACHE_UP
        since = self.unavailable_since_ms
        return CacheState.down(since if since is not None else int(self.wall_clock() * 1000))

    def _unavailable(self) -> None:
        if self.unavailable_since_ms is None:
            self.unavailable_since_ms = int(self.wall_clock() * 1000)

    async def get(self, orders: Sequence[OrderKey]) -> StoredTags | None:
        read = await self.read(orders, [])
        return read.tags if read is not None else None

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey],
        force: Sequence[ForcedOrder] = (),
        force_per_minute: int = 0,
    ) -> TagsRead | None:
        """The orders' tags, the lists' tags with their kept answers, and which forced orders
        are within their budget, in one call (one per hundred orders); None when the cache
        is unavailable (and then no force counts)."""
        if not orders and not lists:
            return TagsRead({}, {}, {})
        if not self.circuit.allow(self.clock()):
            self.metrics.tag_cache_call("circuit_open").inc()
            self._unavailable()
            return None
        # a user with more orders than one call takes: batches within the limit, together;
        # each forced order goes with its order's batch
        batches = batched(orders, MAX_BATCH) or [()]
        forced_in = [[f for f in force if f.key in set(chunk)] for chunk in batches]
        try:
            chunks = await asyncio.gather(
                *(
                    self.client.read(
                        chunk,
                        lists if index == 0 else (),
                        force=forced_in[index],
                        force_per_minute=force_per_minute,
                    )
                    for index, chunk in enumerate(batches)
                )
            )
        except OrderTagsRejected:
            # the request was refused, the cache works: this poll degrades (with those whose
            # reads were joined in the same call), not the cache for everyone
            self.circuit.abandon()
            self.metrics.tag_cache_call("rejected").inc()
            return None
        except OrderTagsUnavailable as failed:
            if failed not in self._failures_counted:
                self._failures_counted.add(failed)
                self.circuit.failure(self.clock())
            self._unavailable()
            self.metrics.tag_cache_call("unavailable").inc()
            self.metrics.circuit_open.set(int(self.circuit.is_open))
            return None
        except BaseException:
            # cancelled mid-call: no verdict on the cache, but never leave a probe hanging
            self.circuit.abandon()
            raise
        self.circuit.success()
        self.unavailable_since_ms = None
        self.read_at_ms = int(self.wall_clock() * 1000)
        self.metrics.tag_cache_call("ok").inc()
        self.metrics.circuit_open.set(0)
        read = TagsRead({}, {}, {})
        for chunk, sent in zip(chunks, forced_in, strict=True):
            # an order_tags that does not answer `forced` (mid-deploy) honours no force
            answered = zip(sent, chunk.forced, strict=False)
            read.force_honoured.update(forced.key for forced, honoured in answered if honoured)
            for order in chunk.orders:
                key = OrderKey(order.service, order.orderid)
                read.tags[key] = order.tags
                if order.created_ms is not None:
                    read.created_ms[key] = order.created_ms
                if order.owner is not None:
                    read.owners[key] = order.owner
                if order.made_ms is not None:
                    read.made_ms[key] = order.made_ms
            for entry in chunk.lists:
                read.lists[entry.service] = entry
        return read

    async def keep(self, answers: Sequence[KeptAnswerOut]) -> None:
        """Keep sources' answers, each under the list tag read before its source was asked; a
        failure only means the next poll asks those sources again."""
        try:
            await self.client.keep_answers(answers)
        except (OrderTagsUnavailable, OrderTagsRejected):
            self.metrics.tag_cache_call("keep_failed").inc()

    async def create_missing(
        self,
        missing: dict[OrderKey, list[str]],
        owner: str | None = None,
        versions: Mapping[OrderKey, int] | None = None,
    ) -> dict[OrderKey, dict[str, str]]:
        """Create content tags for the parts orders lack (all of them when an order is new or
        expired), only where absent, so a feature's tag written meanwhile wins: one call for
        all the orders (one per hundred). `owner`: the user a source listed them for;
        `versions`: each order's version as its source listed it, which the tags made carry.
        Returns every tag stored afterwards for each order; none when the write failed (the
        parts are then fetched again later, never lost)."""
        versions = versions or {}
        requests = [
            OrderParts(key.service, key.orderid, parts, owner, versions.get(key))
            for key, parts in missing.items()
            if parts
        ]
        if not requests:
            return {}
        try:
            chunks = await asyncio.gather(
                *(self.client.create(chunk) for chunk in batched(requests, MAX_BATCH))
            )
        except OrderTagsUnavailable:
            self.metrics.tag_cache_call("create_failed").inc()
            return {}
        self.metrics.tags_created.inc(len(requests))
        return {key: tags for chunk in chunks for key, tags in chunk.items()}

"""At-least-once tag writes for the writers of order_tags: feature services (an order's part
tags) and order sources (a user's list tag). docs/protocol.md: Feature data and user changes.

A writer records a data change's tag writes in an outbox in the same step as the change
(`record`), then sends them (`deliver`): the first attempt inline, so a write that lands at
once costs nothing more than before, and the caller answers after its tags are written. A
write that fails because the store is unavailable (order_tags or its Redis down, a timeout, a
5xx) stays in the outbox and is retried with exponential backoff and full jitter until it
lands, or until a delete of its order supersedes it (the order has finished). A write the
store rejects (4xx) is not retried: it never would land.

In order per key: an order's (or a user's list's) writes go one attempt at a time, and what is
pending for a key is one merged write (shared.protocol.tag_writes), so a later write never
overtakes an earlier one and one pending write per key bounds the outbox; at most
`max_pending` keys are kept, a write failing past that is given up as every failed write was
before (counted, logged).

The outbox (shared.tag_outbox) is data beside the writer's data, so a writer that restarts
finds its writes there: `run` retries at once what a started writer finds in its outbox."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import random
from collections import Counter as Counts
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from shared.errors import OrderTagsRejected, OrderTagsUnavailable
from shared.logs import Sparse
from shared.protocol.tag_writes import (
    ListWrite,
    OrderWrite,
    merged_order_write,
    retry_delay_s,
    supersedes,
)
from shared.tag_outbox import (
    GIVE_UP_REASONS,
    Key,
    Outbox,
    Pending,
    TagStore,
    TagWriteMetrics,
    TagWriterSettings,
    Write,
)
from shared.wire import ListKey, OrderKey

log = logging.getLogger("mlutp.tag_writer")

T = TypeVar("T")
# what an attempt landed: the tags the store answered the last set or bump with, the list tag
Landed = tuple[dict[str, str], str | None]


@dataclass
class _Turn:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class TagWriter:
    """Sends the tag writes recorded in `outbox` to `store`, at least once: `record` each
    write in the same step as its data change, then `deliver_*` it; `start` the retries
    once."""

    def __init__(
        self,
        store: TagStore,
        outbox: Outbox,
        settings: TagWriterSettings | None = None,
        *,
        registry: CollectorRegistry | None = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.store = store
        self.outbox = outbox
        self.settings = settings or TagWriterSettings()
        self.counts: Counts[str] = Counts()
        self._metrics: TagWriteMetrics | None = None
        if registry is not None:
            self._metrics = TagWriteMetrics(registry, lambda: len(outbox), self.oldest_age_s)
        self._draw = draw
        self._turns: dict[Key, _Turn] = {}
        # (due, tie-break, key): the kept writes by when they are retried; an entry whose key
        # has landed or was rescheduled since is skipped when it comes up
        self._due: list[tuple[float, int, Key]] = []
        self._ties = itertools.count()
        self._wake = asyncio.Event()
        self._retrying: set[Key] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._warnings = Sparse()

    # --- writing ----------------------------------------------------------------------------

    def record(self, key: Key, write: Write) -> None:
        """Keep a write in the outbox, merged into what the key has pending (no await: it is
        recorded in the same step as the data change before it)."""
        now = _now()
        pending = self.outbox.pending.get(key)
        if pending is None:
            self.outbox.pending[key] = Pending(write, since=now, due=now)
        elif pending.in_flight:
            if pending.newer is None:
                pending.newer, pending.newer_since = write, now
            else:
                pending.newer = self._merged(pending.newer, write)
        else:
            pending.write = write if pending.write is None else self._merged(pending.write, write)

    async def deliver_order(self, key: OrderKey) -> dict[str, str] | None:
        """The inline attempt of what the order has recorded: the tags the store answered
        its last set or bump with ({} after a delete alone, or when an earlier caller's
        attempt took this write along); None when the write is kept for retry."""
        landed = await self._deliver(key)
        return None if landed is None else landed[0]

    async def deliver_list(self, key: ListKey) -> bool:
        """The inline attempt of a recorded list bump: whether it landed (False: kept)."""
        return await self._deliver(key) is not None

    # --- what is pending --------------------------------------------------------------------

    def oldest_age_s(self) -> float:
        return self.outbox.oldest_age_s(_now())

    def snapshot(self) -> dict[str, Any]:
        return {
            "pending": len(self.outbox),
            "oldest_pending_s": round(self.oldest_age_s(), 3),
            "failures": self.counts["failures"],
            "retries": self.counts["retries"],
            "given_up": {reason: self.counts[f"given_up:{reason}"] for reason in GIVE_UP_REASONS},
        }

    # --- the retries ------------------------------------------------------------------------

    def start(self) -> None:
        self._runner = asyncio.create_task(self.run(), name="tag-writer")

    async def close(self) -> None:
        """Stops retrying; what is pending stays in the outbox."""
        tasks = [task for task in (self._runner, *self._tasks) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        """Retries kept writes as they come due, until cancelled. Writes already in the outbox
        when it starts (a writer restarted on it) are retried at once."""
        self._resume(_now())
        limit = asyncio.Semaphore(self.settings.retry_concurrency)
        while True:
            now = _now()
            while self._due and self._due[0][0] <= now:
                _, _, key = heapq.heappop(self._due)
                self._retry_if_due(key, now, limit)
            self._wake.clear()
            timeout = self._due[0][0] - now if self._due else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _resume(self, now: float) -> None:
        for key, pending in self.outbox.pending.items():
            # an attempt of a writer that stopped may or may not have landed: sent again
            pending.in_flight = False
            self._fold(pending)
            pending.failures, pending.due = max(pending.failures, 1), now
            self._schedule(key, now)

    def _retry_if_due(self, key: Key, now: float, limit: asyncio.Semaphore) -> None:
        pending = self.outbox.pending.get(key)
        if pending is None or not pending.failures or pending.due > now:
            return  # landed, or rescheduled since
        if key in self._retrying:
            return  # its retry is on its way; if it fails, it is scheduled again
        self._retrying.add(key)
        task = asyncio.create_task(self._retry(key, limit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _retry(self, key: Key, limit: asyncio.Semaphore) -> None:
        try:
            async with limit, self._turn(key):
                pending = self.outbox.pending.get(key)
                if pending is None or not pending.failures or pending.due > _now():
                    return  # landed or rescheduled meanwhile
                self._count("retries")
                await self._attempt(key, pending)
        finally:
            self._retrying.discard(key)

    # --- one attempt ------------------------------------------------------------------------

    async def _deliver(self, key: Key) -> Landed | None:
        async with self._turn(key):
            pending = self.outbox.pending.get(key)
            if pending is None:
                return {}, None  # an attempt before this one took the write along
            if pending.failures:
                return None  # kept: it goes with the key's retry, in order
            return await self._attempt(key, pending)

    async def _attempt(self, key: Key, pending: Pending) -> Landed | None:
        pending.in_flight = True
        try:
            landed = await self._send(key, pending)
        except OrderTagsUnavailable as exc:
            self._keep(key, pending, repr(exc))
            return None
        except BaseException:
            self._keep(key, pending, None)
            raise
        self._landed(key, pending)
        return landed

    async def _send(self, key: Key, pending: Pending) -> Landed:
        """Sends what is pending step by step; `pending.write` keeps what is still to send."""
        write = pending.write
        if isinstance(write, ListWrite) and isinstance(key, ListKey):
            tag = await self._rejectable(key, self.store.bump_list(key.service, key.user_id))
            pending.write = None
            if tag is not None and write.on_written is not None:
                write.on_written(tag)
            return {}, tag
        assert isinstance(write, OrderWrite) and isinstance(key, OrderKey), (key, write)
        tags: dict[str, str] | None = {}
        if write.delete:
            await self._rejectable(key, self.store.delete(key.service, key.orderid))
            write = pending.write = replace(write, delete=False)
        if write.sets:
            call = self.store.set(key.service, key.orderid, dict(write.sets), user_id=write.owner)
            tags = await self._rejectable(key, call)
            write = pending.write = replace(write, sets={}, owner=None)
        if write.bumps:
            tags = await self._rejectable(
                key, self.store.bump(key.service, key.orderid, write.bumps)
            )
        pending.write = None
        return tags or {}, None

    async def _rejectable(self, key: Key, call: Awaitable[T]) -> T | None:
        try:
            return await call
        except OrderTagsRejected as exc:
            self._give_up("rejected", key, repr(exc))
            return None

    def _landed(self, key: Key, pending: Pending) -> None:
        pending.in_flight = False
        if pending.newer is None:
            self._forget(key)
            return
        # recorded while this was sent: its own caller attempts it next (it awaits the turn)
        pending.write, pending.since, pending.newer = pending.newer, pending.newer_since, None
        pending.failures = 0

    def _keep(self, key: Key, pending: Pending, error: str | None) -> None:
        """After an attempt that failed (`error`) or was cancelled (None): what is left of
        the write, with what was recorded meanwhile after it, is kept and retried."""
        pending.in_flight = False
        if error is not None:
            self._count("failures")
            kept_already = pending.failures > 0
            if pending.write is not None and not kept_already and self._full():
                self._give_up("full", key, error)
                pending.write = None
        if pending.write is None and pending.newer is not None:
            # only what was recorded meanwhile is left: its own caller attempts it (it awaits
            # the turn)
            self._fold(pending)
            pending.failures = 0
            return
        self._fold(pending)
        if pending.write is None:
            self._forget(key)
            return
        if error is None:
            pending.failures, pending.due = max(pending.failures, 1), _now()
            self._schedule(key, pending.due)
            return
        pending.failures += 1
        settings = self.settings
        delay = retry_delay_s(
            pending.failures, settings.backoff_base_s, settings.backoff_cap_s, self._draw()
        )
        pending.due = _now() + delay
        self._schedule(key, pending.due)
        self._warnings.warning(
            log, "tag write failed, kept for retry", "kept", key=str(key), error=error
        )

    def _full(self) -> bool:
        # the failing key is one of them: it is kept only beside fewer than max_pending others
        return len(self.outbox) > self.settings.max_pending

    # --- helpers ----------------------------------------------------------------------------

    def _merged(self, older: Write, newer: Write) -> Write:
        if isinstance(older, OrderWrite) and isinstance(newer, OrderWrite):
            if supersedes(older, newer):
                self._count("given_up:superseded", "superseded")
            return merged_order_write(older, newer)
        return newer  # list bumps: one does for all, the newest's callback

    def _forget(self, key: Key) -> None:
        del self.outbox.pending[key]

    def _fold(self, pending: Pending) -> None:
        """What was recorded while an attempt was in flight goes after what the attempt left."""
        newer, pending.newer = pending.newer, None
        if newer is None:
            return
        if pending.write is None:
            pending.write, pending.since = newer, pending.newer_since
        else:
            pending.write = self._merged(pending.write, newer)

    def _schedule(self, key: Key, due: float) -> None:
        heapq.heappush(self._due, (due, next(self._ties), key))
        self._wake.set()

    def _give_up(self, reason: str, key: Key, error: str) -> None:
        self._count(f"given_up:{reason}", reason)
        self._warnings.warning(
            log,
            "tag write given up",
            f"given_up:{reason}",
            key=str(key),
            reason=reason,
            error=error,
        )

    def _count(self, name: str, reason: str | None = None) -> None:
        self.counts[name] += 1
        metrics = self._metrics
        if metrics is None:
            return
        if name == "failures":
            metrics.failures.inc()
        elif name == "retries":
            metrics.retries.inc()
        elif reason is not None:
            metrics.given_up.labels(reason).inc()

    @contextlib.asynccontextmanager
    async def _turn(self, key: Key) -> AsyncIterator[None]:
        """One attempt at a time per key, callers served in the order they came."""
        turn = self._turns.get(key)
        if turn is None:
            turn = self._turns[key] = _Turn()
        turn.users += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.users -= 1
            if not turn.users:
                del self._turns[key]


def _now() -> float:
    return asyncio.get_running_loop().time()

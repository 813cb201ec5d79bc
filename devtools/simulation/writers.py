"""The writers' tag writes, delivered at least once (docs/protocol.md: Feature data and user
changes; shared/tag_writer.py is the library's): the first attempt right after the data, and a
write the store refuses (down, paused) kept and retried with exponential backoff and full
jitter, in order per order and per list, until it lands or its order has finished (a delete
supersedes what was pending before it). Writes of one list pending together are one: the
newer bump stands for both. A writer that died between its data and its tags (the bump_loss
fault) finds the write in its outbox when it is back, a few seconds later.

With `lossy` (Options.lossy_writers) a writer drops a write that failed, and one that died
loses it: the behaviour before the contract said "at least once"."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from shared.errors import OrderTagsUnavailable

# the library's defaults (shared/tag_outbox.py): the first retry within 0.1 s, then at least
# every 2 s while the store is down, so a kept write lands within 2 s of the store's return
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 2.0
# a writer that died between its data and its tags is back within this long
RESTART_S = (1.0, 5.0)


@dataclass
class _Write:
    attempt: Callable[[], Awaitable[None]]
    landed: list[Callable[[], None]]
    # no longer to be written (its order finished)
    given_up: Callable[[], bool]
    # a list bump: one pending with it stands for both
    merges: bool
    not_before: float = 0.0
    in_flight: bool = False


@dataclass
class _Queue:
    writes: deque[_Write] = field(default_factory=deque)


class TagWrites:
    def __init__(self, rng: random.Random, now: Callable[[], float], *, lossy: bool) -> None:
        self.rng = rng
        self.now = now
        self.lossy = lossy
        self._pending: dict[Hashable, _Queue] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # writes given up because their order finished first, and writes dropped (lossy)
        self.given_up = 0
        self.dropped = 0

    async def deliver(
        self,
        key: Hashable,
        attempt: Callable[[], Awaitable[None]],
        landed: Callable[[], None],
        *,
        died: bool = False,
        given_up: Callable[[], bool] = lambda: False,
        merges: bool = False,
        supersedes: bool = False,
    ) -> None:
        """One write of `key`: `landed` is called when it lands (now or later)."""
        if died and self.lossy:
            self.dropped += 1
            return
        write = _Write(attempt, [landed], given_up, merges)
        if died:
            write.not_before = self.now() + self.rng.uniform(*RESTART_S)
        queue = self._pending.get(key)
        if queue is None and not died:
            # nothing pending before it: the first attempt at once, as the data's caller waits
            try:
                await attempt()
            except OrderTagsUnavailable:
                if self.lossy:
                    self.dropped += 1
                    return
            else:
                landed()
                return
            # another write of the key may have failed meanwhile and queued: behind it, in
            # order (two queues of one key drained at once, and the second's end found its
            # key gone: a KeyError)
            queue = self._pending.get(key)
        if queue is None:
            queue = self._pending[key] = _Queue()
            task = asyncio.get_running_loop().create_task(self._drain(key, queue))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if supersedes:
            kept = [w for w in queue.writes if w.in_flight]
            self.given_up += len(queue.writes) - len(kept)
            queue.writes = deque(kept)
        last = queue.writes[-1] if queue.writes else None
        if merges and last is not None and last.merges and not last.in_flight:
            last.attempt = attempt
            last.landed.append(landed)
            last.not_before = max(last.not_before, write.not_before)
            return
        queue.writes.append(write)

    async def _drain(self, key: Hashable, queue: _Queue) -> None:
        failures = 1
        while queue.writes:
            write = queue.writes[0]
            if failures:
                window = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (failures - 1))
                await asyncio.sleep(self.rng.random() * window)
            await asyncio.sleep(max(0.0, write.not_before - self.now()))
            if write.given_up():
                queue.writes.popleft()
                self.given_up += 1
                continue
            write.in_flight = True
            try:
                await write.attempt()
            except OrderTagsUnavailable:
                failures += 1
                continue
            finally:
                write.in_flight = False
            queue.writes.popleft()
            failures = 0
            for landed in write.landed:
                landed()
        del self._pending[key]

    @property
    def pending(self) -> int:
        return sum(len(queue.writes) for queue in self._pending.values())

    def close(self) -> None:
        """The run's end: what is still pending stays so."""
        for task in self._tasks:
            task.cancel()

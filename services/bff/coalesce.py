"""One call in flight per key, shared by every caller that asks meanwhile (single flight)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Coalesced(Generic[K, V]):
    def __init__(self) -> None:
        self._in_flight: dict[K, asyncio.Task[V]] = {}

    def __len__(self) -> int:
        return len(self._in_flight)

    async def run(self, key: K, call: Callable[[], Awaitable[V]]) -> tuple[V, bool]:
        """The result of `call`, or of the call already in flight under `key`; and whether
        this caller joined one. A caller cancelled (its client went away) does not cancel the
        call for the others that wait on it."""
        task = self._in_flight.get(key)
        joined = task is not None
        if task is None:
            task = asyncio.ensure_future(call())
            self._in_flight[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(task), joined

    def _forget(self, key: K, done: asyncio.Task[V]) -> None:
        if self._in_flight.get(key) is done:
            del self._in_flight[key]
        if not done.cancelled():
            # retrieved: nobody may be awaiting it when every caller was cancelled
            done.exception()

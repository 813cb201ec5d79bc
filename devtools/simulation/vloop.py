"""An event loop in virtual time: nothing sleeps. Its clock stands still while callbacks run
and jumps to the next timer when there is nothing left to do, so ten minutes of timers,
deadlines and waits pass in the CPU time their callbacks take, and in the same order every
time.

The wall clock follows it: while a run is in progress `time.time()` is the virtual epoch
plus the loop's time, so the product code that reads the wall clock (tag issue times, the
created grace, the min TTL) sees the same virtual time as its timers.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import ExitStack
from typing import Any, TypeVar
from unittest import mock

T = TypeVar("T")

# the virtual wall clock at the loop's time 0: a fixed instant, so tags and created_at texts
# are the same in every run of a seed (2027-01-15T08:00:00Z)
WALL_EPOCH_S = 1_800_000_000.0


class Stalled(RuntimeError):
    """Every task waits and no timer is set: in a real process this would hang for good."""


class _VirtualSelector(selectors.SelectSelector):
    """The loop's selector with no I/O to wait for: asked to wait, it moves the clock on by
    as long instead. Only the loop's own self-pipe is registered, and nothing writes to it
    (no thread, no signal handler)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        # the self-pipe only ever wakes a loop from another thread or a signal: none here
        if timeout == 0:
            return []
        if timeout is None:
            raise Stalled("every task waits and no timer is set: the run would hang")
        self.now += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual = _VirtualSelector()
        super().__init__(self._virtual)

    def time(self) -> float:
        return self._virtual.now


def run_virtual(
    main: Callable[[VirtualLoop], Coroutine[Any, Any, T]],
    *,
    patches: Mapping[str, Callable[..., Any]] | None = None,
) -> T:
    """`main(loop)` to its end on a fresh virtual loop, with `time.time` (and any other
    `patches`: dotted name → replacement) following the loop's clock meanwhile. Tasks still
    pending at the end are cancelled, so a run leaves nothing behind."""
    loop = VirtualLoop()
    with ExitStack() as stack:
        stack.enter_context(mock.patch("time.time", new=lambda: WALL_EPOCH_S + loop.time()))
        for name, replacement in (patches or {}).items():
            stack.enter_context(mock.patch(name, new=replacement))
        try:
            return loop.run_until_complete(main(loop))
        finally:
            _cancel_all(loop)
            loop.close()


def _cancel_all(loop: VirtualLoop) -> None:
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        gathered: Awaitable[list[Any]] = asyncio.gather(*pending, return_exceptions=True)
        loop.run_until_complete(gathered)
    loop.run_until_complete(loop.shutdown_asyncgens())

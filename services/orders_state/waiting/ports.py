"""What a waiting poll needs of the wake-ups, as protocols: `TagWakeups` (Redis pub/sub)
serves them in orders_state; the simulation (devtools/simulation) serves them in memory, so
the waiting polls run there on the same code as in the service."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from services.orders_state.waiting.shard import Waiter


class WakeupWatch(Protocol):
    """One waiting poll's channels and its doorbell."""

    @property
    def waiter(self) -> Waiter: ...

    @property
    def channels(self) -> Collection[str]: ...

    async def listen(self, channels: Sequence[str], deadline_s: float) -> None:
        """Ring on these channels too, once they are confirmed subscribed."""
        ...


class Wakeups(Protocol):
    @property
    def available(self) -> bool:
        """Wake-ups work now: a write from now on rings the polls listening to it."""
        ...

    def listening(self, channel: str) -> bool:
        """Subscribed and confirmed now: a watch of it rings from now on."""
        ...

    def watch(
        self, channels: Sequence[str], deadline_s: float
    ) -> AbstractAsyncContextManager[WakeupWatch]:
        """Listen on these channels (and more, as the watch adds them) until the context
        ends; ConnectionError or TimeoutError when they cannot be within `deadline_s`."""
        ...

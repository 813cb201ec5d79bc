"""What a waiting poll needs of the wake-ups, as protocols, and the doorbell they ring:
`TagWakeups` (Redis pub/sub) serves them in orders_state; the simulation (devtools/simulation)
serves them in memory, so the waiting polls run there on the same code as in the service."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

from services.bff.poll import Poll

if TYPE_CHECKING:
    from shared.protocol.waiting import KeptLook


class Waiter:
    """One waiting poll's doorbell: set on a wake-up of any of its orders or when wake-ups
    stopped working (the connection of one of its shards was lost), and on shutdown."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def ring(self) -> None:
        self.event.set()


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

    def stamp(self, channels: Sequence[str]) -> object:
        """A value that changes when a message is heard on any of these channels, when one is
        subscribed again, or when pub/sub is lost or comes back: equal stamps mean nothing
        was heard on them, and nothing missed, in between (the watch cache's test)."""
        ...

    def watch(
        self, channels: Sequence[str], deadline_s: float
    ) -> AbstractAsyncContextManager[WakeupWatch]:
        """Listen on these channels (and more, as the watch adds them) until the context
        ends; ConnectionError or TimeoutError when they cannot be within `deadline_s`."""
        ...


class WaitObserver(Protocol):
    """Who watches the waiting polls besides their metrics (the simulation checks the watch
    cache through it); the services pass none, and `Unobserved` does nothing."""

    async def held_from_kept_look(
        self, poll: Poll, kept: KeptLook, channels: Sequence[str]
    ) -> None:
        """This poll's first look was taken from its client's kept look (the watch cache),
        which held because nothing was heard on `channels` since `kept` was stamped."""
        ...


class Unobserved:
    """No one watches."""

    async def held_from_kept_look(
        self, poll: Poll, kept: KeptLook, channels: Sequence[str]
    ) -> None:
        return None


UNOBSERVED = Unobserved()

"""A BFF process's wake-ups in memory (services/orders_state/waiting/ports.py: Wakeups): one
pub/sub connection to the simulated Redis, the channels it subscribed (each lingering a while
after its last waiter, as TagWakeups keeps them), and each waiting poll's doorbell.

Losing the connection rings every waiter (they answer at once, as TagWakeups makes them) and
it comes back after a backoff, once Redis is there, subscribed again to what it had. Messages
published while it is down are lost for it.

Each watch knows the user whose poll opened it (the request's context), so the checks can
tell a poll held on another user's channel, or rung by another user's write."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Literal, Protocol

from services.orders_state.waiting.ports import Waiter
from shared.protocol.waiting import WakeupTimings

# the user of the request being served: set by the simulated client around each call
CURRENT_USER: contextvars.ContextVar[str] = contextvars.ContextVar("simulated_user", default="")


class PollState:
    """One orders/state request as the checks follow it: whether it has been held yet."""

    def __init__(self) -> None:
        self.held = False


# the poll being served: set by the process around each orders/state request
CURRENT_POLL: contextvars.ContextVar[PollState | None] = contextvars.ContextVar(
    "simulated_poll", default=None
)
# the reconnect backoff of a shard (services/orders_state/waiting/shard.py)
RECONNECT_BACKOFF_S = (0.1, 0.5, 1.0, 2.0)
# confirming a subscription takes a round trip
SUBSCRIBE_S = 0.001


class WatchObserver(Protocol):
    def held(self, user_id: str, channels: Sequence[str]) -> None:
        """A poll of this user is held now, listening on these channels."""

    def rung(self, user_id: str, channel: str, *, held: bool) -> None:
        """A poll of this user was rung by a write on this channel."""


class _HeldEvent(asyncio.Event):
    """The doorbell's event, telling whether a poll is held on it now."""

    def __init__(self, on_hold: Callable[[], None], poll: PollState | None) -> None:
        super().__init__()
        self.on_hold = on_hold
        self.poll = poll
        self.holding = False

    async def wait(self) -> Literal[True]:
        self.holding = True
        if self.poll is not None:
            self.poll.held = True
        self.on_hold()
        try:
            return await super().wait()
        finally:
            self.holding = False


class SimWatch:
    def __init__(self, hub: SimWakeups, user_id: str) -> None:
        self.hub = hub
        self.user_id = user_id
        self.waiter = Waiter()
        self.event = _HeldEvent(
            lambda: hub.observer.held(user_id, sorted(self.channels)), CURRENT_POLL.get()
        )
        self.waiter.event = self.event
        self.channels: set[str] = set()

    async def listen(self, channels: Sequence[str], deadline_s: float) -> None:
        new = [channel for channel in dict.fromkeys(channels) if channel not in self.channels]
        unconfirmed = [channel for channel in new if not self.hub.listening(channel)]
        for channel in new:
            self.channels.add(channel)
            self.hub.waiters.setdefault(channel, []).append(self)
            self.hub.idle_since.pop(channel, None)
        await self.hub.subscribe(unconfirmed)

    def stop(self) -> None:
        for channel in list(self.channels):
            watches = self.hub.waiters.get(channel, [])
            if self in watches:
                watches.remove(self)
            if not watches:
                self.hub.waiters.pop(channel, None)
                self.hub.idle_since[channel] = self.hub.clock()
        self.channels.clear()


class SimWakeups:
    def __init__(
        self,
        clock: Callable[[], float],
        redis_up: Callable[[], bool],
        observer: WatchObserver,
        *,
        linger_s: float = WakeupTimings.linger_s,
    ) -> None:
        self.clock = clock
        self.redis_up = redis_up
        self.observer = observer
        self.linger_s = linger_s
        self.connected = True
        self.closed = False
        self.waiters: dict[str, list[SimWatch]] = {}
        # subscribed channels; those with no waiter since when (they linger, then go)
        self.subscribed: set[str] = set()
        self.idle_since: dict[str, float] = {}
        self._reconnecting: asyncio.Task[None] | None = None
        # the watch cache's stamps, as TagWakeups keeps them: a fresh number per channel when
        # subscribed and when a message is heard on it; losses and returns of the connection
        self._ticks = itertools.count(1)
        self.generations: dict[str, int] = {}
        self.losses = 0

    # --- the port ----------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return self.connected and not self.closed

    def listening(self, channel: str) -> bool:
        if not self.available or channel not in self.subscribed:
            return False
        since = self.idle_since.get(channel)
        if since is not None and self.clock() - since >= self.linger_s:
            # no poll waited on it for the linger: the sweeper unsubscribed it
            self.subscribed.discard(channel)
            del self.idle_since[channel]
            self.generations.pop(channel, None)
            return False
        return True

    def stamp(self, channels: Sequence[str]) -> object:
        return (self.losses, tuple(self.generations.get(c, 0) for c in channels))

    @contextlib.asynccontextmanager
    async def watch(self, channels: Sequence[str], deadline_s: float) -> AsyncIterator[SimWatch]:
        watch = SimWatch(self, CURRENT_USER.get())
        try:
            await watch.listen(channels, deadline_s)
            yield watch
        finally:
            watch.stop()

    async def subscribe(self, channels: Sequence[str]) -> None:
        if not self.available:
            raise ConnectionError("simulated pub/sub connection is down")
        if not channels:
            return
        await asyncio.sleep(SUBSCRIBE_S)
        if not self.available:
            raise ConnectionError("simulated pub/sub connection lost while subscribing")
        for channel in channels:
            if channel not in self.subscribed:
                self.subscribed.add(channel)
                self.generations[channel] = next(self._ticks)

    # --- the connection ----------------------------------------------------------------

    def deliver(self, channel: str) -> None:
        if not self.available or not self.listening(channel):
            return
        self.generations[channel] = next(self._ticks)
        for watch in list(self.waiters.get(channel, ())):
            self.observer.rung(watch.user_id, channel, held=watch.event.holding)
            watch.waiter.ring()

    def redis_lost(self) -> None:
        self.lose()

    def lose(self) -> None:
        """The connection is gone: every waiter rings, and it comes back by itself."""
        if not self.connected or self.closed:
            return
        self.connected = False
        self.losses += 1
        for watches in list(self.waiters.values()):
            for watch in watches:
                watch.waiter.ring()
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        # bounded: the run ends, and a closed hub stops trying
        for attempt in range(10_000):
            await asyncio.sleep(RECONNECT_BACKOFF_S[min(attempt, len(RECONNECT_BACKOFF_S) - 1)])
            if self.closed:
                return
            if self.redis_up():
                self.connected = True
                self.losses += 1
                return

    def close(self) -> None:
        self.closed = True
        for watches in list(self.waiters.values()):
            for watch in watches:
                watch.waiter.ring()

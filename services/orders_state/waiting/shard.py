"""One pub/sub connection of the wake-ups (one per Redis, or per master of a Redis Cluster).
The connection is the shard's own: lost, it is made anew and subscribed again to every channel
its owner (the hub, wakeups.TagWakeups) still has on it. The shard and its owner meet only
through `ShardOwner` and the shard's public methods."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.crc import key_slot
from redis.exceptions import RedisError

log = logging.getLogger("mlutp.wakeups")

RECONNECT_BACKOFF_S = (0.1, 0.5, 1.0, 2.0)
# how long close() waits for the read loop before it sends its cancellation again
RECANCEL_S = 0.1
# the name of the pub/sub connections in Redis's CLIENT LIST
WAKEUPS_CLIENT_NAME = "mlutp-wakeups"


@contextlib.contextmanager
def lost_if_transport_closed() -> Iterator[None]:
    """A write on a connection whose transport was already closed is a lost connection. On
    Python 3.12 and 3.13, asyncio's `writelines` on such a transport raises TypeError or
    AttributeError instead of dropping the write (CPython gh-136234)."""
    try:
        yield
    except (TypeError, AttributeError) as exc:
        raise ConnectionError(f"pub/sub connection lost while writing: {exc!r}") from exc


class ShardOwner(Protocol):
    """What a shard needs of the hub that owns it."""

    def resubscribing(self, shard: Shard) -> AbstractAsyncContextManager[list[str]]:
        """The channels the owner has on `shard`, for a new connection to subscribe again;
        no channel is subscribed or unsubscribed on the shard until the context ends (the
        shard counts itself up inside it)."""
        ...

    def shard_up(self, shard: Shard, *, resubscribed: int, again: bool) -> None:
        """The shard's connection is up (`again`: it had been up before, and was lost)."""
        ...

    def shard_lost(self, shard: Shard) -> None:
        """The shard's connection, up until now, is lost: nobody is woken through it until
        it is up again."""
        ...

    def wake(self, channel: str) -> None:
        """A message on the channel: a tag write of its order or list."""
        ...


class Shard:
    """One pub/sub connection and the task that reads it.

    The connection is this class's own: on any error the whole PubSub is thrown away and a
    new one made (with backoff), subscribed again to every channel the hub still holds on
    this shard. redis-py's own reconnect is not used: its reads leave a dead connection in
    place (`disconnect_on_error=False`) and, with retries off, never come back from it.
    While idle, a PING every `keepalive_s` keeps a server `timeout` from closing the
    connection and finds one that stopped answering (a paused or blackholed Redis)."""

    def __init__(
        self,
        name: str,
        redis: Redis,
        owner: ShardOwner,
        *,
        owns_client: bool,
        keepalive_s: float,
        by_slot: bool,
    ) -> None:
        self.name = name
        self.redis = redis
        self.owns_client = owns_client
        self.keepalive_s = keepalive_s
        # a cluster node takes the channels of one slot per SSUBSCRIBE
        self.by_slot = by_slot
        self._pubsub: PubSub | None = None
        self._owner = owner
        # the connection is up now
        self.available = False
        # connected once already: the next connection is one back
        self._was_up = False
        # channels whose SSUBSCRIBE is sent and not yet confirmed; set when it is, or when
        # the connection is lost (then `available` says which)
        self._confirmations: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        # close() was called: the read loop ends at its next turn whatever its cancellation
        # became (redis-py can swallow one that meets a read's own timeout)
        self._closing = False

    def start(self) -> None:
        """Connect, and keep connected: a lost connection is made anew, with backoff."""
        self._task = asyncio.create_task(self._run(), name=f"wakeups:{self.name}")

    async def close(self) -> None:
        """Stop connecting, and close the Redis client if it is the shard's own."""
        self._closing = True
        task = self._task
        if task is not None:
            task.cancel()
            # redis-py can lose a cancellation that meets its read's own timeout: the read
            # comes back as "no message" (the loops then end on `_closing`) or reads on (the
            # cancellation is sent again until the task ends); awaited plainly, a lost one
            # hung a shutdown, and a test run's teardown for its 300-s limit
            while not (await asyncio.wait({task}, timeout=RECANCEL_S))[0]:
                task.cancel()
            failed = None if task.cancelled() else task.exception()
            if failed is not None:
                # the read loop failed while it closed: nothing is left to tell
                log.debug(
                    "pub/sub read ended on close", extra={"shard": self.name, "error": repr(failed)}
                )
        # closed, not lost: no one is woken as by a loss, and no subscription waits on
        self.available = False
        for event in self._confirmations.values():
            event.set()
        self._confirmations.clear()
        if self.owns_client:
            await self.redis.aclose()

    def _connected(self) -> PubSub:
        if not self.available or self._pubsub is None:
            raise ConnectionError(f"pub/sub connection of shard {self.name!r} is down")
        return self._pubsub

    async def subscribe(self, channels: Sequence[str]) -> None:
        """Send SSUBSCRIBE for these channels (`confirmed` tells when Redis has them);
        ConnectionError when the connection is down."""
        await self._send_subscribe(self._connected(), channels)

    async def _send_subscribe(self, pubsub: PubSub, channels: Sequence[str]) -> None:
        for channel in channels:
            self._confirmations.setdefault(channel, asyncio.Event())
        groups: Iterable[Sequence[str]] = [channels]
        if self.by_slot:
            slots: dict[int, list[str]] = defaultdict(list)
            for channel in channels:
                slots[key_slot(channel.encode())].append(channel)
            groups = slots.values()
        for group in groups:
            with lost_if_transport_closed():
                await pubsub.ssubscribe(*group)

    def confirming(self, channel: str) -> bool:
        """The channel's SSUBSCRIBE is sent and Redis has not confirmed it yet."""
        return channel in self._confirmations

    async def confirmed(self, channel: str) -> None:
        """Until Redis confirmed the channel's subscription; ConnectionError if the connection
        is lost first."""
        event = self._confirmations.get(channel)
        if event is not None:
            await event.wait()
        if not self.available:
            raise ConnectionError(f"pub/sub connection of shard {self.name!r} is down")

    async def unsubscribe(self, channels: Sequence[str]) -> None:
        """Send SUNSUBSCRIBE for these channels; ConnectionError when the connection is
        down."""
        pubsub = self._connected()
        for channel in channels:
            self._confirmations.pop(channel, None)
        # one SUNSUBSCRIBE per channel: a cluster node refuses channels of several slots
        for channel in channels:
            with lost_if_transport_closed():
                await pubsub.sunsubscribe(channel)

    async def _run(self) -> None:
        attempt = 0
        while not self._closing:
            pubsub = self.redis.pubsub()
            try:
                await self._connect(pubsub)
                attempt = 0
                await self._read(pubsub)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError, TimeoutError) as exc:
                if not self._closing:
                    self._lost(exc)
            finally:
                self._pubsub = None
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            if self._closing:
                return
            # a reconnect backoff, not a wait for an event: nothing announces Redis is back
            await asyncio.sleep(RECONNECT_BACKOFF_S[min(attempt, len(RECONNECT_BACKOFF_S) - 1)])
            attempt += 1

    async def _connect(self, pubsub: PubSub) -> None:
        """A new connection, subscribed again to every channel the owner has on this shard
        (waited on, or lingering), before it counts as up."""
        await pubsub.connect()  # type: ignore[no-untyped-call]
        async with self._owner.resubscribing(self) as channels:
            if channels:
                await self._send_subscribe(pubsub, channels)
            self._pubsub = pubsub
            self.available = True
        self._owner.shard_up(self, resubscribed=len(channels), again=self._was_up)
        self._was_up = True

    async def _read(self, pubsub: PubSub) -> None:
        loop = asyncio.get_running_loop()
        heard_at = loop.time()
        while not self._closing:
            message = await pubsub.get_message(timeout=self.keepalive_s)
            now = loop.time()
            if message is not None:
                heard_at = now
                self._handle(message)
            elif now - heard_at >= 2 * self.keepalive_s:
                # the keepalive sent a period ago has no answer: the server is not there
                raise TimeoutError(
                    f"no answer on the pub/sub connection for {now - heard_at:.1f} s"
                )
            else:
                with lost_if_transport_closed():
                    await pubsub.ping()

    def _lost(self, exc: BaseException) -> None:
        was_available, self.available = self.available, False
        for event in self._confirmations.values():
            event.set()
        self._confirmations.clear()
        if was_available:
            log.warning("pub/sub connection lost", extra={"shard": self.name, "error": repr(exc)})
            self._owner.shard_lost(self)
        else:
            log.debug("pub/sub connection failed", extra={"shard": self.name, "error": repr(exc)})

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        channel = message["channel"]
        if kind == "smessage":
            self._owner.wake(channel)
        elif kind == "ssubscribe":
            event = self._confirmations.pop(channel, None)
            if event is not None:
                event.set()

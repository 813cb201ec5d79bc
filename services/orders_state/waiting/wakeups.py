"""Wake-ups of waiting polls (docs/protocol.md: Waiting poll). order_tags publishes every tag write
on the order's own channel; this process keeps one pub/sub connection (one per shard on a Redis
Cluster, where the channels are sharded like the keys), subscribed to an order's channel
while some poll waits on it and for a short linger after, since the client's next poll
usually waits on the same orders at once.

A wake-up only says "look again": the waiting poll reruns the poll and the tags decide. So a
lost message costs at most one wait, and losing the connection wakes every waiter (they
answer at once, and no poll waits until the connection is back).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import RedisError

from services.orders_state.waiting.metrics import WaitingMetrics
from services.orders_state.waiting.ports import Waiter
from services.orders_state.waiting.shard import WAKEUPS_CLIENT_NAME, Shard
from shared.config import RedisSettings
from shared.protocol.waiting import WakeupTimings
from shared.redis import RedisClient, create_redis

log = logging.getLogger("mlutp.wakeups")

# the sweeper's shortest sleep: a tiny linger must not make it spin a core
MIN_SWEEP_S = 0.05


class Watch:
    """One waiting poll's channels and its doorbell."""

    def __init__(self, wakeups: TagWakeups) -> None:
        self.wakeups = wakeups
        self.waiter = Waiter()
        self.channels: set[str] = set()

    async def listen(self, channels: Sequence[str], deadline_s: float) -> None:
        """Ring on these channels too, once Redis confirmed them (see `TagWakeups.watch`)."""
        new = [channel for channel in dict.fromkeys(channels) if channel not in self.channels]
        for channel in new:
            self.channels.add(channel)
            self.wakeups.add_waiter(channel, self.waiter)
        await self.wakeups.subscribe(new, deadline_s)

    def stop_listening(self, channels: Sequence[str]) -> None:
        """No more rings from these channels; each lingers subscribed for a while."""
        for channel in channels:
            if channel in self.channels:
                self.channels.discard(channel)
                self.wakeups.remove_waiter(channel, self.waiter)


class TagWakeups:
    """The hub: the books of channels and their waiters, over the shards' connections (their
    `ShardOwner`)."""

    def __init__(
        self,
        redis: RedisClient,
        settings: RedisSettings,
        metrics: WaitingMetrics,
        timings: WakeupTimings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.metrics = metrics
        self.timings = timings
        self.clock = clock
        self.cluster = isinstance(redis, RedisCluster)
        self.shards: dict[str, Shard] = {}
        self.waiters: dict[str, set[Waiter]] = defaultdict(set)
        # channels subscribed on Redis, and since when each has had no waiter
        self.subscribed: dict[str, Shard] = {}
        self.idle_since: dict[str, float] = {}
        self._sweeper: asyncio.Task[None] | None = None
        # keeps SSUBSCRIBE and SUNSUBSCRIBE of a channel (by polls, the sweeper and a shard's
        # reconnect) in the order the bookkeeping saw them
        self.lock = asyncio.Lock()
        # the watch cache's stamps (`stamp`): each subscribed channel's generation, a fresh
        # number when it is subscribed and when a message is heard on it, and the times
        # pub/sub was lost or came back (subscribed again: messages in between were lost)
        self._ticks = itertools.count(1)
        self._generations: dict[str, int] = {}
        self._losses = 0

    @property
    def available(self) -> bool:
        """Wake-ups work now: every shard's connection is up."""
        return bool(self.shards) and all(shard.available for shard in self.shards.values())

    async def start(self) -> None:
        if isinstance(self.redis, RedisCluster):
            await self.redis.initialize()
            for node in self.redis.get_primaries():
                self._add_shard(node.name, node.host, node.port)
        else:
            self.shards[""] = Shard(
                "",
                self.redis,
                self,
                owns_client=False,
                keepalive_s=self.timings.keepalive_s,
                by_slot=False,
            )
        for shard in self.shards.values():
            shard.start()
        self._sweeper = asyncio.create_task(self._sweep(), name="wakeups:sweeper")

    def _add_shard(self, name: str, host: str, port: int | str) -> Shard:
        client = create_redis(
            self.settings,
            f"redis://{host}:{port}/0",
            client_name=WAKEUPS_CLIENT_NAME,
            retry_lost_connection=False,
        )
        assert isinstance(client, Redis)
        shard = self.shards[name] = Shard(
            name, client, self, owns_client=True, keepalive_s=self.timings.keepalive_s, by_slot=True
        )
        return shard

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await asyncio.gather(*(shard.close() for shard in self.shards.values()))
        for waiters in self.waiters.values():
            for waiter in waiters:
                waiter.ring()

    def _shard_of(self, channel: str) -> Shard:
        if isinstance(self.redis, RedisCluster):
            node = self.redis.get_node_from_key(channel)
            if node is None:
                raise ConnectionError(f"no cluster node serves {channel}")
            shard = self.shards.get(node.name)
            if shard is None:
                shard = self._add_shard(node.name, node.host, node.port)
                shard.start()
            return shard
        return self.shards[""]

    def listening(self, channel: str) -> bool:
        """Subscribed on Redis and confirmed now: a watch of it rings from now on."""
        shard = self.subscribed.get(channel)
        return shard is not None and shard.available and not shard.confirming(channel)

    def stamp(self, channels: Sequence[str]) -> object:
        """Changes when a message is heard on any of these channels, when one is subscribed
        again, or when pub/sub is lost or comes back."""
        return (self._losses, tuple(self._generations.get(c, 0) for c in channels))

    @contextlib.asynccontextmanager
    async def watch(self, channels: Sequence[str], deadline_s: float) -> AsyncIterator[Watch]:
        """Listen on these channels (orders' and users' lists'), and on more as the watch
        adds them. The subscriptions are confirmed by Redis before this yields, so a write
        from then on rings the waiter; ConnectionError or TimeoutError when they cannot be
        within `deadline_s`."""
        watch = Watch(self)
        try:
            await watch.listen(channels, deadline_s)
            yield watch
        finally:
            watch.stop_listening(list(watch.channels))

    def add_waiter(self, channel: str, waiter: Waiter) -> None:
        """Ring `waiter` on the channel's messages (once subscribed: `subscribe`)."""
        self.waiters[channel].add(waiter)
        self.idle_since.pop(channel, None)

    def remove_waiter(self, channel: str, waiter: Waiter) -> None:
        """No more rings of `waiter` from the channel; with no waiter left, the channel
        lingers subscribed for `timings.linger_s`."""
        waiters = self.waiters.get(channel)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self.waiters[channel]
                self.idle_since[channel] = self.clock()

    async def subscribe(self, channels: Sequence[str], deadline_s: float) -> None:
        """Subscribe these channels where they are not, and until Redis confirmed each;
        ConnectionError or TimeoutError when that cannot be within `deadline_s`."""
        if all(map(self.listening, channels)):
            # the usual re-poll: all confirmed already, nothing to lock or await
            return
        try:
            async with asyncio.timeout(deadline_s):
                # the lock keeps SSUBSCRIBE and the sweeper's SUNSUBSCRIBE of a channel in the
                # order the bookkeeping saw them
                async with self.lock:
                    new: dict[Shard, list[str]] = defaultdict(list)
                    for channel in channels:
                        if channel not in self.subscribed:
                            shard = self._shard_of(channel)
                            self.subscribed[channel] = shard
                            self._generations[channel] = next(self._ticks)
                            new[shard].append(channel)
                    for shard, shard_channels in new.items():
                        await shard.subscribe(shard_channels)
                for channel in channels:
                    subscribed_on = self.subscribed.get(channel)
                    if subscribed_on is None:
                        raise ConnectionError(f"{channel} is not subscribed")
                    await subscribed_on.confirmed(channel)
        except (RedisError, OSError, TimeoutError):
            # not known to be subscribed: the next watch of these channels subscribes again
            for channel in channels:
                on = self.subscribed.get(channel)
                if on is not None and (on.confirming(channel) or not on.available):
                    del self.subscribed[channel]
                    self._generations.pop(channel, None)
            raise
        finally:
            self.metrics.channels.set(len(self.subscribed))

    # --- ShardOwner: what the shards ask of the hub -------------------------------------------

    @contextlib.asynccontextmanager
    async def resubscribing(self, shard: Shard) -> AsyncIterator[list[str]]:
        # the lock: no poll or sweep (un)subscribes a channel meanwhile
        async with self.lock:
            yield [channel for channel, on in self.subscribed.items() if on is shard]

    def shard_up(self, shard: Shard, *, resubscribed: int, again: bool) -> None:
        self._losses += 1
        self.metrics.pubsub_up.set(int(self.available))
        if again:
            log.info(
                "pub/sub connection back",
                extra={"shard": shard.name, "resubscribed": resubscribed},
            )

    def wake(self, channel: str) -> None:
        if channel in self.subscribed:
            self._generations[channel] = next(self._ticks)
        waiters = self.waiters.get(channel)
        self.metrics.messages.inc()
        if not waiters:
            return
        for waiter in waiters:
            waiter.ring()
        self.metrics.wakeups.inc(len(waiters))

    def shard_lost(self, shard: Shard) -> None:
        """Its waiters can no longer be woken, so they answer now. Its channels stay in the
        books: the shard subscribes them again when it is back."""
        self._losses += 1
        self.metrics.pubsub_up.set(0)
        self.metrics.pubsub_lost.inc()
        for channel, waiters in self.waiters.items():
            if self.subscribed.get(channel) is shard:
                for waiter in waiters:
                    waiter.ring()

    async def _sweep(self) -> None:
        """Unsubscribe channels no poll has waited on for `timings.linger_s`."""
        while True:
            # a timer by nature: idleness is the absence of events
            await asyncio.sleep(max(MIN_SWEEP_S, min(1.0, self.timings.linger_s)))
            now = self.clock()
            async with self.lock:
                expired = [
                    c
                    for c, since in self.idle_since.items()
                    if now - since >= self.timings.linger_s
                ]
                by_shard: dict[Shard, list[str]] = defaultdict(list)
                for channel in expired:
                    del self.idle_since[channel]
                    self._generations.pop(channel, None)
                    subscribed_on = self.subscribed.pop(channel, None)
                    if subscribed_on is not None:
                        by_shard[subscribed_on].append(channel)
                for shard, channels in by_shard.items():
                    try:
                        if not shard.available:
                            raise ConnectionError("shard down")
                        await shard.unsubscribe(channels)
                    except (RedisError, OSError):
                        # still subscribed (redis-py subscribes again on reconnect): later
                        for channel in channels:
                            self.subscribed.setdefault(channel, shard)
                            self._generations[channel] = next(self._ticks)
                            if channel not in self.waiters:
                                self.idle_since[channel] = now
            self.metrics.channels.set(len(self.subscribed))

"""The waiting poll (docs/protocol.md: Waiting poll): orders/state held until a part changes.

A poll that asks to wait listens on its orders' channels, then polls as usual. With news it
answers at once. Otherwise it is held until a wake-up (a tag write on one of its orders),
or the moment the min TTL lets a change through (it is due): each looks again (sources and
tags), which answers if there is news and otherwise waits on for the time left. At the end of
its wait a poll answers with its last look, which had no news; the client polls again at
once, and that poll's tags see any change whose wake-up was lost. Tags stay the only truth: a
wake-up only says "look again".
While waiting a poll holds nothing but its connection: no upstream call, no Redis command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from redis.exceptions import RedisError

from services.bff.admission import Admission
from services.bff.engine import LookResult, OrdersStateEngine
from services.bff.known_orders import ParsedKnownOrder
from services.orders_state.waiting.metrics import WaitingMetrics
from services.orders_state.waiting.ports import Wakeups
from services.orders_state.waiting.shard import Waiter
from shared.errors import Overloaded
from shared.protocol.waiting import (
    has_news,
    lost_cache_interval_ms,
    shed_interval_ms,
    wait_budget_ms,
)
from shared.redis import list_channel, tags_channel
from shared.wire import USER_HEADER, OrderKey

log = logging.getLogger("mlutp.waiting")

# the answers metric's cause of a poll refused (503) by admission control before it waited
OVERLOADED = "overloaded"


def _news(known_statuses: Mapping[OrderKey, str], result: LookResult) -> bool:
    return has_news(known_statuses, result.orders, policy_changed=result.policy_changed)


class WaitCause(StrEnum):
    """Why a poll that asked to wait was answered when it was (the X-Mlutp-Wait header).
    After news, wakeup, timeout or shutdown the client may poll again at once; after
    unavailable or shed it polls at the interval, as without waiting."""

    NEWS = "news"  # news at once, no wait
    WAKEUP = "wakeup"  # news after a wake-up or the min TTL
    TIMEOUT = "timeout"  # the wait ended without news
    UNAVAILABLE = "unavailable"  # cannot wait now: tag cache, a source or pub/sub is down
    SHED = "shed"  # past the cap of waiting polls
    SHUTDOWN = "shutdown"  # the process is stopping


@dataclass(frozen=True)
class WaitedAnswer:
    result: LookResult
    # None for a poll that did not ask to wait
    cause: WaitCause | None


@dataclass(frozen=True)
class WaitingConfig:
    max_waiting: int = 10_000
    # one user's polls held at once (a few devices, a few tabs): one user cannot take the cap
    max_waiting_per_user: int = 8
    # how long subscribing to the orders' channels may take before the poll gives up waiting
    subscribe_deadline_s: float = 0.5
    # after a wake-up, look again this much later: the writes of one burst (a feature writing
    # several parts, changes made in one go) come as one answer and one round of part fetches
    wakeup_settle_s: float = 0.0
    # past the cap, the interval given grows by this much (load shedding)
    shed_factor: float = 2.0
    interval_max_ms: int = 60_000


class WaitingPolls:
    def __init__(
        self,
        engine: OrdersStateEngine,
        admission: Admission,
        wakeups: Wakeups | None,
        config: WaitingConfig,
        metrics: WaitingMetrics,
        rng: random.Random | None = None,
    ) -> None:
        self.engine = engine
        self.admission = admission
        self.wakeups = wakeups
        self.config = config
        self.metrics = metrics
        self.rng = rng or random.Random()
        self.waiting = 0
        self.waiting_by_user: Counter[str] = Counter()
        # polls held now: listening, polled, nothing to say yet
        self.held = 0
        self.held_changed = asyncio.Condition()
        self.shutting_down = False
        self._waiters: set[Waiter] = set()

    async def until_held(self, count: int) -> None:
        """Until exactly `count` polls are held (for tests and benchmarks: the moment a
        change must wake them)."""
        async with self.held_changed:
            await self.held_changed.wait_for(lambda: self.held == count)

    async def _set_held(self, delta: int) -> None:
        self.held += delta
        async with self.held_changed:
            self.held_changed.notify_all()

    def shutdown(self) -> None:
        """SIGTERM: every waiting poll answers now, and no new poll waits."""
        self.shutting_down = True
        for waiter in self._waiters:
            waiter.ring()

    def _can_wait(self) -> bool:
        return self.wakeups is not None and self.wakeups.available and not self.shutting_down

    async def answer(
        self,
        known: Sequence[ParsedKnownOrder],
        services: Sequence[str],
        headers: dict[str, str],
        wait_ms: int,
        stated_versions: Mapping[str, str] | None = None,
    ) -> WaitedAnswer:
        if wait_ms == 0:
            with self.admission.look():
                result = await self.engine.look(known, services, headers, stated_versions)
                return WaitedAnswer(result, None)
        try:
            answered = await self._answer(known, services, headers, wait_ms, stated_versions)
        except Overloaded:
            # shed by admission control at its first look, before it could wait
            self.metrics.answers.labels(OVERLOADED).inc()
            raise
        self.metrics.answers.labels(answered.cause.value if answered.cause else "").inc()
        return answered

    async def _answer(
        self,
        known: Sequence[ParsedKnownOrder],
        services: Sequence[str],
        headers: dict[str, str],
        wait_ms: int,
        stated_versions: Mapping[str, str] | None,
    ) -> WaitedAnswer:
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + wait_budget_ms(wait_ms, self.rng) / 1000
        known_statuses = {k.key: k.order.status for k in known}

        looks = 0

        async def look() -> LookResult:
            nonlocal looks
            looks += 1
            # admission control sheds a request at its first look only: once admitted and
            # held, a poll is answered, however many polls a write wakes at once
            with self.admission.look(admitted=looks > 1):
                return await self.engine.look(known, services, headers, stated_versions)

        def at_once(result: LookResult) -> WaitedAnswer:
            """The answer of a poll that will not wait (whatever the reason)."""
            if result.cannot_wait or not self._can_wait():
                cause = WaitCause.SHUTDOWN if self.shutting_down else WaitCause.UNAVAILABLE
                return WaitedAnswer(result, cause)
            return WaitedAnswer(result, WaitCause.NEWS)

        if not self._can_wait():
            return at_once(await look())
        user_id = headers.get(USER_HEADER, "")
        if (
            self.waiting >= self.config.max_waiting
            or self.waiting_by_user[user_id] >= self.config.max_waiting_per_user
        ):
            result = await look()
            if result.cannot_wait or has_news(
                known_statuses, result.orders, policy_changed=result.policy_changed
            ):
                return at_once(result)
            interval_ms = shed_interval_ms(
                result.interval_ms,
                factor=self.config.shed_factor,
                max_ms=self.config.interval_max_ms,
            )
            return WaitedAnswer(replace(result, interval_ms=interval_ms), WaitCause.SHED)

        assert self.wakeups is not None
        wakeups = self.wakeups
        # the slot is taken before the first look, so the caps hold for polls in any phase
        self.waiting += 1
        self.waiting_by_user[user_id] += 1
        self.metrics.waiting.inc()
        try:
            async with contextlib.AsyncExitStack() as stack:
                order_channels = [tags_channel(k.order.service, k.order.orderid) for k in known]
                try:
                    # listen before the first look: a write from then on rings. Only on the
                    # user's own lists and on order channels already listened to (usually
                    # this client's orders, from its last poll): the orders the client names
                    # are not known to be the user's before the look
                    watch = await stack.enter_async_context(
                        wakeups.watch(
                            [
                                *self._list_channels(services, user_id),
                                *filter(wakeups.listening, order_channels),
                            ],
                            self.config.subscribe_deadline_s,
                        )
                    )
                    self._waiters.add(watch.waiter)
                    stack.callback(self._waiters.discard, watch.waiter)
                    result = await look()
                    if result.cannot_wait or has_news(
                        known_statuses, result.orders, policy_changed=result.policy_changed
                    ):
                        return at_once(result)
                    # no news: every known order is in the answer, the source listed it for
                    # the user. The rest of their channels now; a write before Redis
                    # confirmed them is seen by one more look
                    unheard = [c for c in order_channels if c not in watch.channels]
                    if unheard:
                        await watch.listen(unheard, self.config.subscribe_deadline_s)
                except (RedisError, OSError, TimeoutError) as exc:
                    log.warning("cannot listen for wake-ups", extra={"error": repr(exc)})
                    return WaitedAnswer(await look(), WaitCause.UNAVAILABLE)
                if unheard:
                    result = await look()
                    if result.cannot_wait or has_news(
                        known_statuses, result.orders, policy_changed=result.policy_changed
                    ):
                        return at_once(result)
                return await self._wait(
                    watch.waiter, look, result, known_statuses, ends_at, at_once
                )
        finally:
            self.waiting -= 1
            self.waiting_by_user[user_id] -= 1
            if not self.waiting_by_user[user_id]:
                del self.waiting_by_user[user_id]
            self.metrics.waiting.dec()

    def _lost(self, result: LookResult) -> WaitedAnswer:
        """A held poll's answer when the tag cache or pub/sub is lost: its last look, with an
        interval that spreads the return of every poll answered so."""
        engine = self.engine.config
        interval_ms = lost_cache_interval_ms(
            result.interval_ms,
            degraded_factor=engine.interval.degraded_factor,
            spread_ms=engine.timings.degraded_min_ttl_ms,
            max_ms=engine.interval.max_ms,
            rng=self.rng,
        )
        return WaitedAnswer(replace(result, interval_ms=interval_ms), WaitCause.UNAVAILABLE)

    def _list_channels(self, services: Sequence[str], user_id: str) -> list[str]:
        """The user's list channels of the services with list tags: an order created
        elsewhere, finished or moved by its source."""
        if not user_id:
            return []
        return [
            list_channel(service, user_id)
            for service in self.engine.listed_services(services, user_id)
        ]

    async def _wait(
        self,
        waiter: Waiter,
        look: Callable[[], Awaitable[LookResult]],
        result: LookResult,
        known_statuses: dict[OrderKey, str],
        ends_at: float,
        at_once: Callable[[LookResult], WaitedAnswer],
    ) -> WaitedAnswer:
        """Held from a look without news until a wake-up, the min TTL or the wait's end."""
        loop = asyncio.get_running_loop()
        while True:
            if self.shutting_down:
                return WaitedAnswer(result, WaitCause.SHUTDOWN)
            if not self._can_wait() or not self.engine.tag_cache.available:
                return self._lost(result)
            wake_at = ends_at
            if result.due_at_ms is not None:
                # a change the min TTL holds back is news once the TTL has passed
                held_s = (result.due_at_ms - time.time() * 1000) / 1000
                wake_at = min(wake_at, loop.time() + max(0.0, held_s))
            await self._set_held(1)
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(wake_at):
                        await waiter.event.wait()
            finally:
                await self._set_held(-1)
            woken = waiter.event.is_set()
            if self.shutting_down:
                return WaitedAnswer(result, WaitCause.SHUTDOWN)
            if not self._can_wait() or not self.engine.tag_cache.available:
                # the pub/sub connection or the tag cache was lost (that rang every held
                # poll): answered with the last look, as on shutdown. A new look would find
                # the cache down and ask every source, and thousands of held polls doing so in
                # one instant are a burst no legacy client ever made
                return self._lost(result)
            if woken and self.config.wakeup_settle_s > 0:
                # a debounce by nature: the rest of a burst of writes is not announced
                await asyncio.sleep(self.config.wakeup_settle_s)
                if self.shutting_down:
                    return WaitedAnswer(result, WaitCause.SHUTDOWN)
            # the timer, not the clock: a loop's timer may fire a little before its moment
            # by the loop's clock (uvloop's clock has whole milliseconds), and that is the end
            if not woken and wake_at >= ends_at:
                # the last look had no news, and the client polls again at once: a lost
                # wake-up is seen by that poll's tags, so looking again here would only double
                # every idle client's cost (a source call and a tag read per wait)
                return WaitedAnswer(result, WaitCause.TIMEOUT)
            # cleared before looking again: a write during the next poll rings again
            waiter.event.clear()
            result = await look()
            if result.cannot_wait or not self._can_wait():
                return at_once(result)
            if _news(known_statuses, result):
                return WaitedAnswer(result, WaitCause.WAKEUP)
            if loop.time() >= ends_at:
                return WaitedAnswer(result, WaitCause.TIMEOUT)

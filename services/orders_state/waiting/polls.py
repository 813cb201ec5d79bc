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
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from redis.exceptions import RedisError

from services.bff.admission import Admission
from services.bff.engine import LookResult, OrdersStateEngine
from services.bff.poll import Poll
from services.orders_state.waiting.kept_looks import BodyKeyOf, KeptLooks, body_key, cache_key
from services.orders_state.waiting.metrics import WaitingMetrics
from services.orders_state.waiting.ports import (
    UNOBSERVED,
    Waiter,
    WaitObserver,
    Wakeups,
    WakeupWatch,
)
from services.orders_state.waiting.seen_users import SeenUsers
from services.orders_state.waiting.wait import Wait
from shared.errors import Overloaded
from shared.logs import Sparse
from shared.protocol.list_tags import KEPT_AGE_SPREAD_FROM
from shared.protocol.waiting import (
    KEEP_WAITING,
    Answer,
    Moment,
    WaitCause,
    WaitingConfig,
    lost_cache_interval_ms,
    shed_interval_ms,
    wait_budget_ms,
)
from shared.redis import list_channel, tags_channel

log = logging.getLogger("mlutp.waiting")

# the answers metric's cause of a poll refused (503) by admission control before it waited
OVERLOADED = "overloaded"

__all__ = ["OVERLOADED", "WaitCause", "WaitedAnswer", "WaitingConfig", "WaitingPolls"]


@dataclass(frozen=True)
class WaitedAnswer:
    result: LookResult
    # None for a poll that did not ask to wait
    cause: WaitCause | None


class WaitingPolls:
    def __init__(
        self,
        engine: OrdersStateEngine,
        admission: Admission,
        wakeups: Wakeups | None,
        config: WaitingConfig,
        metrics: WaitingMetrics,
        rng: random.Random | None = None,
        *,
        observer: WaitObserver = UNOBSERVED,
    ) -> None:
        self.engine = engine
        self.admission = admission
        self.wakeups = wakeups
        self.config = config
        self.metrics = metrics
        self.observer = observer
        self._warnings = Sparse()
        self.rng = rng or random.Random()
        # polls that asked to wait and took a slot (in any phase: looking, listening, held)
        self.waiting = 0
        self.waiting_by_user: Counter[str] = Counter()
        # polls held now: listening, looked, nothing to say yet
        self.held = 0
        self.shutting_down = False
        self._waiters: set[Waiter] = set()
        # the watch cache: each client's last look with no news
        self.kept_looks = KeptLooks(
            max_entries=config.max_waiting,
            max_age_ms=KEPT_AGE_SPREAD_FROM * engine.config.list_max_age_ms,
            tags_read_within_ms=config.tags_read_within_s * 1000,
        )
        # a client polls again at once after a waiting answer, or within the longest interval
        self.seen_users = SeenUsers(
            max_entries=4 * config.max_waiting, forget_after_s=config.interval_max_ms / 1000
        )

    def shutdown(self) -> None:
        """SIGTERM: every waiting poll answers now, and no new poll waits."""
        self.shutting_down = True
        for waiter in self._waiters:
            waiter.ring()

    async def answer(self, poll: Poll, body_key_of: BodyKeyOf = body_key) -> WaitedAnswer:
        """`body_key_of`: the watch cache's key of the poll's body, or a memo of it (a kept
        body's: a digest request reuses the key its full body's poll computed)."""
        if poll.wait_ms == 0:
            with self.admission.admit():
                result = await self.engine.look(poll)
                return WaitedAnswer(result, None)
        loop = asyncio.get_running_loop()
        now = loop.time()
        first_here = self.seen_users.first_here(poll.user_id, now)
        ends_at = now + wait_budget_ms(poll.wait_ms, self.rng, first_here=first_here) / 1000
        wait = Wait(self, poll, ends_at, body_key_of)
        try:
            answered = await self._answer(wait)
        except Overloaded:
            # shed by admission control at its first look, before it could wait
            self.metrics.answers.labels(OVERLOADED).inc()
            raise
        self.metrics.answers.labels(answered.cause.value if answered.cause else "").inc()
        return answered

    async def _answer(self, wait: Wait) -> WaitedAnswer:
        wakeups = self.wakeups
        if wakeups is None or not wakeups.available or self.shutting_down:
            return await self._at_once(wait, may_wait=False)
        user_id = wait.poll.user_id
        if not self._take_slot(user_id):
            return await self._at_once(wait, room=False)
        try:
            return await self._listen_then_look(wait, wakeups)
        finally:
            self._free_slot(user_id)

    def _take_slot(self, user_id: str) -> bool:
        """A waiting slot for a poll of this user, unless the process or the user is at the
        cap. Taken before the first look, so the caps hold for polls in any phase."""
        if (
            self.waiting >= self.config.max_waiting
            or self.waiting_by_user[user_id] >= self.config.max_waiting_per_user
        ):
            return False
        self.waiting += 1
        self.waiting_by_user[user_id] += 1
        self.metrics.waiting.inc()
        return True

    def _free_slot(self, user_id: str) -> None:
        self.waiting -= 1
        self.waiting_by_user[user_id] -= 1
        if not self.waiting_by_user[user_id]:
            del self.waiting_by_user[user_id]
        self.metrics.waiting.dec()

    async def _listen_then_look(self, wait: Wait, wakeups: Wakeups) -> WaitedAnswer:
        """Listen before the first look, so that a write from then on rings; then look (or
        take the client's kept look) and hold the poll while it has no news."""
        order_channels = [
            tags_channel(known_order.order.service, known_order.order.orderid)
            for known_order in wait.poll.known_orders
        ]
        list_channels = self._list_channels(wait.poll)
        # a kept look stands while nothing is heard on any of them (the watch cache)
        channels = [*list_channels, *order_channels]
        async with contextlib.AsyncExitStack() as stack:
            try:
                # only the user's own lists and order channels already listened to (usually
                # this client's orders, from its last poll): the orders the client names are
                # not known to be the user's before the look
                watch = await self._watch(
                    stack, wakeups, [*list_channels, *filter(wakeups.listening, order_channels)]
                )
            except (RedisError, OSError, TimeoutError) as exc:
                return await self._cannot_listen(wait, exc)
            may_hold = self._may_hold(wait.poll)
            key = cache_key(wait.poll, wait.body_key_of) if may_hold else None
            tag_cache = self.engine.tag_cache
            kept = self.kept_looks.holding(
                key,
                wakeups,
                channels,
                tag_cache_up=tag_cache.available,
                tags_read_at_ms=tag_cache.read_at_ms,
            )
            if kept is not None:
                # nothing changed since this client's last look: held from it
                self.metrics.cached_looks.inc()
                kept_look, kept_result = kept
                result = wait.cached(kept_result)
                await self.observer.held_from_kept_look(wait.poll, kept_look, channels)
                return await self._wait(wait, watch.waiter, result, key, channels)
            result = await self._look(wait, key, channels)
            verdict = wait.verdict(Moment.LOOKED, result)
            if verdict is not KEEP_WAITING:
                return self._reply(result, verdict)
            # no news: every known order is in the answer, the source listed it for the user.
            # The rest of their channels now; a write before Redis confirmed them is seen by
            # one more look
            unheard = [c for c in order_channels if c not in watch.channels]
            if unheard:
                try:
                    await watch.listen(unheard, self.config.subscribe_deadline_s)
                except (RedisError, OSError, TimeoutError) as exc:
                    return await self._cannot_listen(wait, exc)
                result = await self._look(wait, key, channels)
                verdict = wait.verdict(Moment.LOOKED, result)
                if verdict is not KEEP_WAITING:
                    return self._reply(result, verdict)
            return await self._wait(wait, watch.waiter, result, key, channels)

    async def _watch(
        self, stack: contextlib.AsyncExitStack, wakeups: Wakeups, channels: Sequence[str]
    ) -> WakeupWatch:
        """Listen on these channels until the poll is answered; its doorbell rung on
        shutdown."""
        watch = await stack.enter_async_context(
            wakeups.watch(channels, self.config.subscribe_deadline_s)
        )
        self._waiters.add(watch.waiter)
        stack.callback(self._waiters.discard, watch.waiter)
        return watch

    async def _cannot_listen(self, wait: Wait, exc: Exception) -> WaitedAnswer:
        self._warnings.warning(log, "cannot listen for wake-ups", "listen", error=repr(exc))
        return await self._at_once(wait, may_wait=False)

    async def _at_once(
        self, wait: Wait, *, may_wait: bool = True, room: bool = True
    ) -> WaitedAnswer:
        """A poll that will not be held (it cannot listen, or is past the caps): one look,
        answered whatever it finds."""
        result = await wait.look()
        verdict = wait.verdict(Moment.LOOKED, result, may_wait=may_wait, room=room)
        assert isinstance(verdict, Answer), "a poll that cannot be held is answered at once"
        return self._reply(result, verdict)

    async def _look(self, wait: Wait, key: Hashable | None, channels: Sequence[str]) -> LookResult:
        """A look of a waiting poll, kept for the client's next poll when it had no news and
        every channel was listened to from before it began (so a write after it rings)."""
        assert self.wakeups is not None
        stamped = self.kept_looks.stamp(key, self.wakeups, channels)
        result = await wait.look()
        if key is not None and stamped is not None:
            no_news = (
                not result.cannot_wait
                and not result.policy_changed
                and wait.verdict(Moment.LOOKED, result) is KEEP_WAITING
            )
            self.kept_looks.keep(key, stamped, result if no_news else None)
        return result

    async def _wait(
        self,
        wait: Wait,
        waiter: Waiter,
        result: LookResult,
        key: Hashable | None,
        channels: Sequence[str],
    ) -> WaitedAnswer:
        """Held on a look without news until a wake-up, the min TTL or the wait's end, then
        looks again, until its verdict answers."""
        verdict = wait.verdict(Moment.HOLDING, result)
        while verdict is KEEP_WAITING:
            moment = await self._hold(waiter, result, wait.ends_at)
            verdict = wait.verdict(moment, result)
            if moment is Moment.RUNG and verdict is KEEP_WAITING and self.config.wakeup_settle_s:
                # a debounce by nature: the rest of a burst of writes is not announced. Then
                # whether it may still wait, before it looks again
                await asyncio.sleep(self.config.wakeup_settle_s)
                verdict = wait.verdict(moment, result)
            if verdict is KEEP_WAITING:
                # cleared before looking again: a write during the next look rings again
                waiter.event.clear()
                result = await self._look(wait, key, channels)
                verdict = wait.verdict(Moment.LOOKED_AGAIN, result)
        return self._reply(result, verdict)

    async def _hold(self, waiter: Waiter, result: LookResult, ends_at: float) -> Moment:
        """Hold the poll until its doorbell rings, the min TTL lets a change its last look
        held back through, or its wait ends: which of them it was."""
        loop = asyncio.get_running_loop()
        wake_at = ends_at
        if result.due_at_ms is not None:
            # a change the min TTL holds back is news once the TTL has passed
            due_in_s = (result.due_at_ms - time.time() * 1000) / 1000
            wake_at = min(wake_at, loop.time() + max(0.0, due_in_s))
        self._count_held(1)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(wake_at):
                    await waiter.event.wait()
        finally:
            self._count_held(-1)
        if waiter.event.is_set():
            return Moment.RUNG
        # the timer, not the clock: a loop's timer may fire a little before its moment by the
        # loop's clock (uvloop's clock has whole milliseconds), and that is the end
        return Moment.ENDED if wake_at >= ends_at else Moment.DUE

    def _count_held(self, delta: int) -> None:
        self.held += delta
        self.metrics.held.set(self.held)

    def _reply(self, result: LookResult, answer: Answer) -> WaitedAnswer:
        """The answer of the verdict: the look, with the interval of a poll shed or answered
        as Redis was lost."""
        if answer.cause is WaitCause.SHED:
            interval_ms = shed_interval_ms(
                result.interval_ms,
                factor=self.config.shed_factor,
                max_ms=self.config.interval_max_ms,
            )
            result = replace(result, interval_ms=interval_ms)
        elif answer.redis_lost:
            # spreads the return of every poll answered so
            engine = self.engine.config
            interval_ms = lost_cache_interval_ms(
                result.interval_ms,
                degraded_factor=engine.interval.degraded_factor,
                spread_ms=engine.timings.degraded_min_ttl_ms,
                max_ms=engine.interval.max_ms,
                rng=self.rng,
            )
            result = replace(result, interval_ms=interval_ms)
        return WaitedAnswer(result, answer.cause)

    def _may_hold(self, poll: Poll) -> bool:
        """Whether the poll may be held from its client's last look (the watch cache): only
        when every source it asks has list tags. A source without them has no tag to wake a
        poll, so it is asked on every poll: an order created on another device shows within
        a wait, not at the next full look."""
        if not self.config.watch_cache:
            return False
        listed = self.engine.listed_services(poll)
        return all(s in listed for s in poll.services if s in self.engine.sources)

    def _list_channels(self, poll: Poll) -> list[str]:
        """The user's list channels of the services with list tags: an order created
        elsewhere, finished or moved by its source."""
        return [
            list_channel(service, poll.user_id) for service in self.engine.listed_services(poll)
        ]

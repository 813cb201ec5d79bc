"""How a BFF process (devtools/simulation/bff.py) is observed: through the observer ports the
engine and the waiting polls take at construction (services/bff/observer.py,
services/orders_state/waiting/ports.py), none changing what the product does. The engine
tells of each look (the invariants checked look by look); each poll held from a kept look
(the watch cache) is checked at that moment against a fresh look."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from devtools.simulation.wakeups import CURRENT_POLL, WatchObserver
from services.bff.engine import LookResult, OrdersStateEngine
from services.bff.known_orders import ParsedKnownOrder
from services.bff.poll import Poll
from services.orders_state.waiting.ports import Wakeups
from shared.policy import PartEndpoint
from shared.protocol.waiting import KeptLook, has_news
from shared.wire import OrderKey

if TYPE_CHECKING:
    from devtools.simulation.bff import PollReply


class LookObserver(Protocol):
    def look_started(self, known: Sequence[ParsedKnownOrder]) -> dict[OrderKey, Any]:
        """What the observer needs of the moment before the look (the stored tags of the
        orders it forces)."""
        ...

    def look(
        self,
        process: str,
        user_id: str,
        known: Sequence[ParsedKnownOrder],
        started: float,
        result: LookResult,
        before: dict[OrderKey, Any],
    ) -> None: ...

    def looked_again(self, process: str, user_id: str, lost: str) -> None:
        """A held poll looked again though its process knew `lost` ("the tag cache",
        "pub/sub") was gone."""

    def kept_look_missed(
        self,
        process: str,
        user_id: str,
        channels: Sequence[str],
        since_s: float,
        held_s: float,
        news: str,
    ) -> None:
        """A poll held from a kept look that a fresh look made at that moment answers with
        news (`news` says which): the watch cache hid a change, unless a message on one of
        its channels was lost since `since_s` (loop time of the kept look), or one was
        published from `held_s` on (when the poll was held: that write rings it)."""


class PollObserver(LookObserver, WatchObserver, Protocol):
    def answered(self, process: str, user_id: str, reply: PollReply) -> None: ...

    def part_answered(
        self, user_id: str, endpoint: PartEndpoint, parts: list[dict[str, Any]]
    ) -> None: ...


class ProcessLooks:
    """The engine's observer (services.bff.observer.LookObserver): tells the checks of each
    look of one process."""

    def __init__(self, observer: LookObserver, process: str, lost: Callable[[], str]) -> None:
        self.observer = observer
        self.process = process
        # what of Redis the process knows it has lost now ("" when nothing)
        self.lost = lost

    def look_started(self, poll: Poll) -> tuple[float, dict[OrderKey, Any]]:
        started = asyncio.get_running_loop().time()
        state = CURRENT_POLL.get()
        lost = self.lost()
        if state is not None and state.held and lost:
            # docs/protocol.md: Waiting poll, "polls already held when the tag cache or the
            # pub/sub connection is lost are answered with their last look, with no new look"
            self.observer.looked_again(self.process, poll.user_id, lost)
        return started, self.observer.look_started(poll.known_orders)

    def looked(self, poll: Poll, result: LookResult, started: object) -> None:
        assert isinstance(started, tuple)
        at, before = started
        self.observer.look(self.process, poll.user_id, poll.known_orders, at, result, before)


class KeptLookChecks:
    """The waiting polls' observer (services.orders_state.waiting.ports.WaitObserver): each
    poll held from a kept look (the watch cache) checked at that moment against a fresh look:
    one with news is a change the cache made it miss. The fresh look is the one the poll made
    before the cache, so the sources and the store see the same calls; its answer is only
    compared, never sent."""

    def __init__(
        self,
        observer: PollObserver,
        process: str,
        engine: OrdersStateEngine,
        wakeups: Wakeups,
    ) -> None:
        self.observer = observer
        self.process = process
        self.engine = engine
        self.wakeups = wakeups

    async def held_from_kept_look(
        self, poll: Poll, kept: KeptLook, channels: Sequence[str]
    ) -> None:
        stamp = self.wakeups.stamp(channels)
        loop = asyncio.get_running_loop()
        held_s = loop.time()
        since_s = held_s - (time.time() * 1000 - kept.since_ms) / 1000
        fresh = await self.engine.look(poll)
        # a write during the fresh look rings the held poll: only what was there before counts
        # (one heard by now changes the stamp; one still on its way is known to the checks)
        if self.wakeups.stamp(channels) == stamp and not fresh.cannot_wait:
            known_statuses = {
                known_order.key: known_order.order.status for known_order in poll.known_orders
            }
            news = _news(known_statuses, fresh)
            if news:
                self.observer.kept_look_missed(
                    self.process, poll.user_id, channels, since_s, held_s, news
                )


def _news(known_statuses: Mapping[OrderKey, str], fresh: LookResult) -> str:
    if not has_news(known_statuses, fresh.orders, policy_changed=fresh.policy_changed):
        return ""
    return (
        "; ".join(
            f"{o.key.service}:{o.key.orderid} {o.status}"
            + (f" need_request {list(o.need_request)}" if getattr(o, "need_request", None) else "")
            for o in fresh.orders
        )
        or "a known order left out"
    )

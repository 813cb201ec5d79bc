"""The thin subclasses through which a BFF process (devtools/simulation/bff.py) is observed,
none changing what the product does: the engine tells an observer of each look (the
invariants checked look by look), the waiting polls check each poll held from a kept look
(the watch cache) against a fresh look, and the listings keep a poll's answers in service
order, where the engine hands them over in the order of a set of service names, which is the
interpreter's hash order: with it, a seed would replay differently under another
PYTHONHASHSEED."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from devtools.simulation.wakeups import CURRENT_POLL, WatchObserver
from services.bff.engine import LookResult, OrdersStateEngine
from services.bff.known_orders import ParsedKnownOrder
from services.bff.listings import Listings
from services.bff.poll import Poll
from services.bff.tag_cache import TagsRead
from services.orders_state.waiting.polls import WaitingPolls, _Wait
from shared.policy import PartEndpoint
from shared.protocol.waiting import KeptLook, has_news
from shared.upstream_wire import SourceResponse
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
        self, process: str, user_id: str, channels: Sequence[str], since_s: float, news: str
    ) -> None:
        """A poll held from a kept look that a fresh look made at that moment answers with
        news (`news` says which): the watch cache hid a change, unless a message on one of
        its channels was lost since `since_s` (loop time of the kept look)."""


class PollObserver(LookObserver, WatchObserver, Protocol):
    def answered(self, process: str, user_id: str, reply: PollReply) -> None: ...

    def part_answered(
        self, user_id: str, endpoint: PartEndpoint, parts: list[dict[str, Any]]
    ) -> None: ...


class ObservedEngine(OrdersStateEngine):
    """The engine, telling an observer of each look."""

    observer: LookObserver
    process: str
    # what of Redis the process knows it has lost now ("" when nothing)
    lost: Callable[[], str]

    async def look(self, poll: Poll, *, handing_out: bool = False) -> LookResult:
        started = asyncio.get_running_loop().time()
        state = CURRENT_POLL.get()
        lost = self.lost()
        if state is not None and state.held and lost:
            # docs/protocol.md: Waiting poll, "polls already held when the tag cache or the
            # pub/sub connection is lost are answered with their last look, with no new look"
            self.observer.looked_again(self.process, poll.user_id, lost)
        before = self.observer.look_started(poll.known)
        result = await super().look(poll, handing_out=handing_out)
        self.observer.look(self.process, poll.user_id, poll.known, started, result, before)
        return result


class CheckedWaitingPolls(WaitingPolls):
    """The waiting polls, each poll held from a kept look (the watch cache) checked at that
    moment against a fresh look: one with news is a change the cache made it miss. The fresh
    look is the one the poll made before the cache, so the sources and the store see the
    same calls; its answer is only compared, never sent."""

    observer: PollObserver
    process: str

    async def _held_from(
        self, wait: _Wait, kept: KeptLook, result: LookResult, channels: Sequence[str]
    ) -> LookResult:
        held = await super()._held_from(wait, kept, result, channels)
        wakeups = self.wakeups
        assert wakeups is not None
        stamp = wakeups.stamp(channels)
        loop = asyncio.get_running_loop()
        since_s = loop.time() - (time.time() * 1000 - kept.since_ms) / 1000
        fresh = await self.engine.look(wait.poll)
        # a write during the fresh look rings the held poll: only what was there before counts
        if wakeups.stamp(channels) == stamp and not fresh.cannot_wait:
            news = _news(wait.known_statuses, fresh)
            if news:
                self.observer.kept_look_missed(
                    self.process, wait.poll.user_id, channels, since_s, news
                )
        return held


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


class OrderedListings(Listings):
    """Kept answers in the services' name order: the engine hands them in the sources' order
    now, but the seeds recorded in tests/simulation (the known failures' especially) were found
    with this order of the kept ages' random draws, and replay only with it."""

    def keep(
        self,
        user_id: str,
        read: TagsRead | None,
        asked: Mapping[str, SourceResponse | None],
    ) -> None:
        super().keep(user_id, read, dict(sorted(asked.items())))

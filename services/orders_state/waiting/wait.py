"""One poll that asked to wait (docs/protocol.md: Waiting poll), as its WaitingPolls hold it:
its looks, counted for admission control, and its verdict at each moment."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from services.bff.engine import LookResult
from services.bff.poll import Poll
from services.orders_state.waiting.kept_looks import BodyKeyOf
from shared.protocol.waiting import Moment, Verdict, waiting_verdict

if TYPE_CHECKING:
    from services.orders_state.waiting.polls import WaitingPolls


class Wait:
    """One poll that asked to wait: its looks, and its verdict at each moment from what the
    process knows then (shared.protocol.waiting.waiting_verdict decides)."""

    def __init__(
        self,
        polls: WaitingPolls,
        poll: Poll,
        ends_at: float,
        body_key_of: BodyKeyOf,
    ) -> None:
        self.polls = polls
        self.poll = poll
        self.body_key_of = body_key_of
        self.known_statuses = {
            known_order.key: known_order.order.status for known_order in poll.known_orders
        }
        self.ends_at = ends_at
        self.looks = 0

    async def look(self) -> LookResult:
        self.looks += 1
        # admission control sheds a request at its first look only: once admitted and held, a
        # poll is answered, however many polls a write wakes at once
        with self.polls.admission.admit(already=self.looks > 1):
            return await self.polls.engine.look(self.poll)

    def cached(self, result: LookResult) -> LookResult:
        """The kept look (the watch cache) stands for this poll's first look: admission
        control still sheds it, and its interval is drawn afresh."""
        self.looks += 1
        if self.looks == 1:
            self.polls.admission.check()
        engine = self.polls.engine
        return replace(
            result, interval_ms=engine.interval_ms(result.orders, degraded=result.degraded)
        )

    def verdict(
        self, moment: Moment, result: LookResult, *, may_wait: bool = True, room: bool = True
    ) -> Verdict:
        """`may_wait` false: the poll could not listen, whatever wake-ups do now."""
        polls = self.polls
        return waiting_verdict(
            moment,
            result,
            self.known_statuses,
            may_wait=may_wait and polls.wakeups is not None and polls.wakeups.available,
            tag_cache_up=polls.engine.tag_cache.available,
            shutting_down=polls.shutting_down,
            time_left_s=self.ends_at - asyncio.get_running_loop().time(),
            room=room,
        )

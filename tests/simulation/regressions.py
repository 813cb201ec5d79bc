"""The four failures the last review found where the mechanisms meet, put back one at a time
by monkeypatching the code their fixes changed (never a product flag), so a test can show the
simulation finds each (docs/protocol.md: List tags, Waiting poll, Tags and need_request):

- `lagging_answer_kept` (a): a lagging source's answer is kept under the list tag read before
  it was asked, as if current (the fix: only an answer under the tag read is kept,
  shared.protocol.list_tags.answer_current);
- `held_polls_look_again` (b): a held poll that losing Redis rang looks again, asking every
  source (the fix: it answers with its last look, WaitingPolls._lost);
- `kept_ages_unspread` (c): every kept answer lives exactly list_max_age (the fix: each its own
  age between 0.75 and 1 of it, shared.protocol.list_tags.kept_answer_max_age_ms);
- `force_per_order` (d): force is counted per order, whoever forces it (the fix: per order
  and user, wire.ForcedOrder with user_id)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable

import pytest

from services.bff.engine import LookResult
from services.orders_state.waiting import polls
from services.orders_state.waiting.polls import WaitCause, WaitedAnswer, WaitingPolls
from services.orders_state.waiting.shard import Waiter
from shared.wire import ForcedOrder, OrderKey


def lagging_answer_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("services.bff.engine.answer_current", lambda *_, **__: True)


async def _wait_before_the_fix(
    self: WaitingPolls,
    waiter: Waiter,
    look: Callable[[], Awaitable[LookResult]],
    result: LookResult,
    known_statuses: dict[OrderKey, str],
    ends_at: float,
    at_once: Callable[[LookResult], WaitedAnswer],
) -> WaitedAnswer:
    """WaitingPolls._wait as it was before 1e920c3: a woken poll looks again whatever rang."""
    loop = asyncio.get_running_loop()
    while True:
        if self.shutting_down:
            return WaitedAnswer(result, WaitCause.SHUTDOWN)
        if not self._can_wait():
            return at_once(result)
        wake_at = ends_at
        if result.due_at_ms is not None:
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
        if not woken and wake_at >= ends_at:
            return WaitedAnswer(result, WaitCause.TIMEOUT)
        waiter.event.clear()
        result = await look()
        if result.cannot_wait or not self._can_wait():
            return at_once(result)
        if polls._news(known_statuses, result):
            return WaitedAnswer(result, WaitCause.WAKEUP)
        if loop.time() >= ends_at:
            return WaitedAnswer(result, WaitCause.TIMEOUT)


def held_polls_look_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WaitingPolls, "_wait", _wait_before_the_fix)


def kept_ages_unspread(monkeypatch: pytest.MonkeyPatch) -> None:
    def whole_age(max_age_ms: int, rng: random.Random) -> int:
        return max_age_ms

    monkeypatch.setattr("services.bff.listings.kept_answer_max_age_ms", whole_age)


def force_per_order(monkeypatch: pytest.MonkeyPatch) -> None:
    def without_user(service: str, orderid: str, user_id: str | None = None) -> ForcedOrder:
        return ForcedOrder(service, orderid)

    monkeypatch.setattr("services.bff.engine.ForcedOrder", without_user)


SWITCHES: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "a": lagging_answer_kept,
    "b": held_polls_look_again,
    "c": kept_ages_unspread,
    "d": force_per_order,
}

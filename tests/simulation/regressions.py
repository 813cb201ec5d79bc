"""The four failures the last review found where the mechanisms meet, and the watch cache's
own, put back one at a time by monkeypatching the code their fixes changed (never a product
flag), so a test can show the simulation finds each (docs/protocol.md: List tags, Waiting
poll, Tags and need_request):

- `lagging_answer_kept` (a): a lagging source's answer is kept under the list tag read before
  it was asked, as if current (the fix: only an answer under the tag read is kept,
  shared.protocol.list_tags.answer_current);
- `held_polls_look_again` (b): a held poll that losing Redis rang looks again, asking every
  source (the fix: it answers with its last look, shared.protocol.waiting.waiting_verdict);
- `kept_ages_unspread` (c): every kept answer lives exactly list_max_age (the fix: each its own
  age between 0.75 and 1 of it, shared.protocol.list_tags.kept_answer_max_age_ms);
- `force_per_order` (d): force is counted per order, whoever forces it (the fix: per order
  and user, wire.ForcedOrder with user_id);
- `watch_cache_deaf` (e): the watch cache holds a re-poll from its client's last look though
  a message was heard on its channels since (or pub/sub was lost): the stamp is ignored (the
  check: shared.protocol.waiting.kept_look_holds compares it);
- `part_cache_without_user` (i): the shared part cache keys an order's entries by part and
  question alone, not by user (the fix: the user in the entry's field,
  services.bff.part_cache.entry_field), so one user's fetched part answers another's request;
- `part_cache_any_content` (j): the shared part cache serves an entry younger than its TTL
  whatever content tag it was fetched under (the fix: only under the content tag current
  now, shared.protocol.parts.kept_part_serves)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import pytest

from services.bff.ports import PartKey
from services.orders_state.waiting import kept_looks, wait
from shared.protocol.waiting import (
    Answer,
    KeptLook,
    Look,
    Moment,
    Verdict,
    kept_look_holds,
    waiting_verdict,
)
from shared.wire import ForcedOrder, OrderKey


def lagging_answer_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("services.bff.listings.answer_current", lambda *_, **__: True)


def _verdict_before_the_fix(
    moment: Moment, look: Look, known_statuses: Mapping[OrderKey, str], **process: Any
) -> Verdict:
    """The waiting verdict as it was before 1e920c3: a woken poll looks again whatever rang,
    a held poll waits on whatever the tag cache's circuit says, and one answered as pub/sub
    was lost keeps its look's interval."""
    if moment in (Moment.RUNG, Moment.DUE, Moment.ENDED):
        process["may_wait"] = True
    process["tag_cache_up"] = True
    verdict = waiting_verdict(moment, look, known_statuses, **process)
    if isinstance(verdict, Answer) and verdict.redis_lost:
        return Answer(verdict.cause)
    return verdict


def held_polls_look_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wait, "waiting_verdict", _verdict_before_the_fix)


def kept_ages_unspread(monkeypatch: pytest.MonkeyPatch) -> None:
    def whole_age(max_age_ms: int, rng: random.Random) -> int:
        return max_age_ms

    monkeypatch.setattr("services.bff.listings.kept_answer_max_age_ms", whole_age)


def force_per_order(monkeypatch: pytest.MonkeyPatch) -> None:
    def without_user(service: str, orderid: str, user_id: str | None = None) -> ForcedOrder:
        return ForcedOrder(service, orderid)

    monkeypatch.setattr("services.bff.engine.ForcedOrder", without_user)


def watch_cache_deaf(monkeypatch: pytest.MonkeyPatch) -> None:
    def deaf(kept: KeptLook, **now: Any) -> bool:
        return kept_look_holds(kept, **{**now, "stamp": kept.stamp})

    monkeypatch.setattr(kept_looks, "kept_look_holds", deaf)


def no_version_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Monotonic reads off: no answer is found older than the version its client echoed."""

    def none_behind(*_: Any, **__: Any) -> set[Any]:
        return set()

    monkeypatch.setattr("services.bff.monotonic_reads.orders_behind", none_behind)


def part_cache_without_user(monkeypatch: pytest.MonkeyPatch) -> None:
    def without_user(key: PartKey) -> bytes:
        return msgspec.json.encode([key.part, key.params])

    monkeypatch.setattr("services.bff.part_cache.entry_field", without_user)


def part_cache_any_content(monkeypatch: pytest.MonkeyPatch) -> None:
    def any_content(
        kept_content: str,
        kept_issued_ms: int,
        stored_content: str | None,
        *,
        now_ms: int,
        ttl_ms: int,
    ) -> bool:
        return stored_content is not None and now_ms - kept_issued_ms < ttl_ms

    monkeypatch.setattr("services.bff.part_cache_step.kept_part_serves", any_content)


SWITCHES: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "a": lagging_answer_kept,
    "b": held_polls_look_again,
    "c": kept_ages_unspread,
    "d": force_per_order,
    "e": watch_cache_deaf,
    "h": no_version_check,
    "i": part_cache_without_user,
    "j": part_cache_any_content,
}

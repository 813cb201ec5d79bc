"""Kept source answers (docs/protocol.md: List tags): a source's answer is kept under the
list tag read before it was asked, and a later poll that reads the same list tag takes the
kept answer instead of asking the source; which just-asked answers are current enough to keep,
and which known orders a lagging source does not list yet. The decisions are
`shared.protocol.list_tags`'."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Collection, Mapping, Sequence

import msgspec

from services.bff.metrics import BffMetrics
from services.bff.poll import Poll
from services.bff.tag_cache import TagCache, TagsRead
from shared import wire
from shared.errors import BadRequest
from shared.protocol.list_tags import (
    answer_current,
    kept_answer_max_age_ms,
    kept_answer_usable,
    within_created_grace,
)
from shared.upstream_wire import SourceResponse
from shared.wire import KeptAnswerOut, OrderKey

log = logging.getLogger("mlutp.listings")

_source_response = msgspec.json.Decoder(SourceResponse)


def lagging_orders(
    poll: Poll,
    read: TagsRead | None,
    available: Collection[str],
    listed: Collection[OrderKey],
    *,
    now_ms: int,
    grace_ms: int,
) -> set[OrderKey]:
    """The poll's known orders that their available source does not list, but whose tags
    were made within the created grace: the source lags behind their creation, and they stay
    (stale). The user's own orders alone: naming another's id reveals nothing."""
    if read is None:
        return set()
    return {
        known_order.key
        for known_order in poll.known_orders
        if known_order.order.service in available
        and known_order.key not in listed
        and read.owners.get(known_order.key) == poll.user_id
        and within_created_grace(
            read.created_ms.get(known_order.key), now_ms=now_ms, grace_ms=grace_ms
        )
    }


def current_answers(
    asked: Mapping[str, SourceResponse | None],
    list_tags: Mapping[str, str],
    not_listed_yet: Collection[OrderKey],
) -> set[str]:
    """The services whose just-asked answer shows data at least as new as the list tag read
    before the call, and omits no just-created order (`not_listed_yet`): only such an answer is kept
    and has its orders' missing tags made."""
    omitting = {key.service for key in not_listed_yet}
    return {
        service
        for service, answer in asked.items()
        if answer is not None
        and answer_current(
            list_tags.get(service), answer.list_tag, omits_a_just_created_order=service in omitting
        )
    }


class Listings:
    def __init__(
        self,
        tag_cache: TagCache,
        metrics: BffMetrics,
        *,
        max_age_ms: int,
        max_keeping: int = 1000,
        rng: random.Random | None = None,
    ) -> None:
        self.tag_cache = tag_cache
        self.metrics = metrics
        self.max_age_ms = max_age_ms
        self.rng = rng or random.Random()
        # answers being written: the poll does not wait for them, and they are bounded
        self.max_keeping = max_keeping
        self._keeping: set[asyncio.Task[None]] = set()

    def kept(
        self, read: TagsRead | None, services: Sequence[str], now_ms: int
    ) -> dict[str, SourceResponse]:
        """The services whose kept answer stands for asking their source now."""
        if read is None:
            return {}  # the tag cache is unavailable: every source is asked
        answers: dict[str, SourceResponse] = {}
        for service in services:
            entry = read.lists.get(service)
            kept = entry.kept if entry is not None else None
            if entry is None or kept is None:
                continue
            if not kept_answer_usable(
                entry.tag, kept.tag, kept.at_ms, now_ms=now_ms, max_age_ms=self.max_age_ms
            ):
                continue
            try:
                answers[service] = _source_response.decode(kept.answer)
            except msgspec.DecodeError:
                log.warning("a kept answer does not decode", extra={"service": service})
                continue
            self.metrics.source_call(service, "kept").inc()
        return answers

    @staticmethod
    def kept_since_ms(read: TagsRead | None, kept: Collection[str]) -> int | None:
        """When the oldest of these kept answers was kept (unix ms): from then on it may
        expire, in the store, after KEPT_AGE_SPREAD_FROM × list_max_age."""
        lists = read.lists if read is not None else {}
        return min(
            (
                entry.kept.at_ms
                for service in kept
                if (entry := lists.get(service)) is not None and entry.kept
            ),
            default=None,
        )

    def keep(
        self,
        user_id: str,
        read: TagsRead | None,
        asked: Mapping[str, SourceResponse | None],
    ) -> None:
        """Keep each asked source's answer under the list tag read before it was asked, in
        the background (the poll's answer does not wait for the write). In the services'
        name order: each answer's age is drawn in that order, whatever order the poll named
        its services in, so a run with a seeded rng draws the same ages."""
        if read is None:
            return
        answers: list[KeptAnswerOut] = []
        for service, answer in sorted(asked.items()):
            entry = read.lists.get(service)
            if answer is None or entry is None:
                continue
            encoded = msgspec.Raw(wire.encode(answer))
            try:
                wire.check_kept_answer(msgspec.to_builtins(answer), len(encoded))
            except BadRequest:
                # order_tags would refuse it (too large or too deep), and with it the other
                # users' answers joined in its call
                self.metrics.tag_cache_call("keep_skipped").inc()
                continue
            max_age_ms = kept_answer_max_age_ms(self.max_age_ms, self.rng)
            answers.append(KeptAnswerOut(service, user_id, entry.tag, encoded, max_age_ms))
        if not answers:
            return
        if len(self._keeping) >= self.max_keeping:
            self.metrics.tag_cache_call("keep_skipped").inc(len(answers))
            return
        # one call for the poll's answers (joined with other polls' where the store joins)
        task = asyncio.create_task(self.tag_cache.keep(answers))
        self._keeping.add(task)
        task.add_done_callback(self._keeping.discard)

    async def drain(self) -> None:
        """Until the answers being kept now are written (on shutdown; tests await it)."""
        if self._keeping:
            await asyncio.gather(*self._keeping, return_exceptions=True)

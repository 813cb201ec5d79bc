"""Kept source answers (docs/protocol.md: List tags): a source's answer is kept under the
list tag read before it was asked, and a later poll that reads the same list tag takes the
kept answer instead of asking the source. The decision is `shared.protocol.list_tags`'."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence

import msgspec

from services.bff.metrics import BffMetrics
from services.bff.tag_cache import TagCache, TagsRead
from shared import wire
from shared.errors import BadRequest
from shared.protocol.list_tags import kept_answer_max_age_ms, kept_answer_usable
from shared.upstream_wire import SourceResponse
from shared.wire import KeptAnswerOut

log = logging.getLogger("mlutp.listings")

_source_response = msgspec.json.Decoder(SourceResponse)


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
            self.metrics.sources.labels(service, "kept").inc()
        return answers

    def keep(
        self,
        user_id: str,
        read: TagsRead | None,
        asked: Mapping[str, SourceResponse | None],
    ) -> None:
        """Keep each asked source's answer under the list tag read before it was asked, in
        the background (the poll's answer does not wait for the write)."""
        if read is None:
            return
        answers: list[KeptAnswerOut] = []
        for service, answer in asked.items():
            entry = read.lists.get(service)
            if answer is None or entry is None:
                continue
            encoded = msgspec.Raw(wire.encode(answer))
            try:
                wire.check_kept_answer(msgspec.to_builtins(answer), len(encoded))
            except BadRequest:
                # order_tags would refuse it (too large or too deep), and with it the other
                # users' answers joined in its call
                self.metrics.tag_cache.labels("keep_skipped").inc()
                continue
            max_age_ms = kept_answer_max_age_ms(self.max_age_ms, self.rng)
            answers.append(KeptAnswerOut(service, user_id, entry.tag, encoded, max_age_ms))
        if not answers:
            return
        if len(self._keeping) >= self.max_keeping:
            self.metrics.tag_cache.labels("keep_skipped").inc(len(answers))
            return
        # one call for the poll's answers (joined with other polls' where the store joins)
        task = asyncio.create_task(self.tag_cache.keep(answers))
        self._keeping.add(task)
        task.add_done_callback(self._keeping.discard)

    async def drain(self) -> None:
        """Until the answers being kept now are written (on shutdown; tests await it)."""
        if self._keeping:
            await asyncio.gather(*self._keeping, return_exceptions=True)

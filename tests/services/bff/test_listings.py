"""Kept source answers (services/bff/listings.py): what order_tags would refuse to keep is
never sent, so it cannot fail the other users' answers joined in the same call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.bff.listings import Listings
from services.bff.tag_cache import TagsRead
from shared.protocol.allowed_changes import SourceAllowance
from shared.upstream_wire import SourceOrder, SourceResponse
from shared.wire import MAX_JSON_DEPTH, KeptAnswerOut, ListEntry
from tests.services.fakes import FakeOrderTags, metrics, tag_cache


class KeepingTags(FakeOrderTags):
    def __init__(self) -> None:
        super().__init__()
        self.kept: list[KeptAnswerOut] = []

    async def keep_answers(self, answers: Sequence[KeptAnswerOut], **kwargs: Any) -> None:
        self.kept.extend(answers)


def answer(brief: dict[str, Any]) -> SourceResponse:
    order = SourceOrder("o1", "driving", "2026-01-01T10:00:00.000Z", brief)
    return SourceResponse([order], SourceAllowance(can_make_more_orders=True))


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


async def test_an_answer_too_deep_for_order_tags_is_not_sent_and_the_others_are():
    tags = KeepingTags()
    listings = Listings(tag_cache(tags), metrics(), max_age_ms=120_000)
    read = TagsRead({}, {}, {s: ListEntry(s, "u1", tag="t1") for s in ("taxi", "eats")})
    listings.keep(
        "u1",
        read,
        {"taxi": answer({"deep": nested(MAX_JSON_DEPTH)}), "eats": answer({"flat": 1})},
    )
    await listings.drain()
    assert [kept.service for kept in tags.kept] == ["eats"]
    # kept for its own age limit: between three quarters and all of list_max_age
    assert 90_000 <= tags.kept[0].max_age_ms <= 120_000

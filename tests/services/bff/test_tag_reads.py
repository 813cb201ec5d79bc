"""Tag reads of concurrent polls joined into one order_tags call (services/bff/tag_reads.py):
each poll gets exactly its own orders and lists, no call passes order_tags' limits, and a
failed call fails every read joined in it and no other."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
import pytest

from services.bff.tag_reads import KEEP_CALL_BYTES, JoinedTagReads
from shared.errors import OrderTagsRejected, OrderTagsUnavailable
from shared.wire import (
    MAX_BATCH,
    MAX_LISTS,
    ForcedOrder,
    KeptAnswerOut,
    ListEntry,
    ListKey,
    OrderKey,
    OrderTags,
    TagsGetResponse,
)


class EchoStore:
    """order_tags answering each order with its own id and each list with its user: a read
    that got another's answer shows it. Counts its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []  # orders and lists per call
        self.keeps: list[list[tuple[str, str]]] = []  # (user, service) per keep call
        self.kept: list[tuple[str, str]] = []  # (user, service) of the keep calls that wrote
        self.down = False
        # a keep call with this user's answer is refused whole, as order_tags refuses a call
        # with one answer it will not keep
        self.refuse_user: str | None = None

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey] = (),
        *,
        force: Sequence[ForcedOrder] = (),
        force_per_minute: int = 0,
        deadline_s: float | None = None,
    ) -> TagsGetResponse:
        assert len(orders) <= MAX_BATCH and len(lists) <= MAX_LISTS, "past order_tags' limits"
        self.calls.append((len(orders), len(lists)))
        await asyncio.sleep(0)  # an answer comes later, as over the network
        if self.down:
            raise OrderTagsUnavailable("down")
        return TagsGetResponse(
            orders=[OrderTags(o.service, o.orderid, {"echo": o.orderid}) for o in orders],
            lists=[ListEntry(one.service, one.user_id, tag=one.user_id) for one in lists],
            # honoured where the user forcing is the order's own (its id begins with it)
            forced=[f.orderid.startswith(f"{f.user_id}-") for f in force],
        )

    async def keep_answers(
        self, answers: Sequence[KeptAnswerOut], *, deadline_s: float | None = None
    ) -> None:
        assert len(answers) <= MAX_LISTS, "past order_tags' limits"
        self.keeps.append([(answer.user_id, answer.service) for answer in answers])
        await asyncio.sleep(0)
        if self.down:
            raise OrderTagsUnavailable("down")
        if any(answer.user_id == self.refuse_user for answer in answers):
            raise OrderTagsRejected("400 too_deep")
        self.kept += [(answer.user_id, answer.service) for answer in answers]


def poll_of(user: str, orders: int) -> tuple[list[OrderKey], list[ListKey]]:
    return (
        [OrderKey("taxi", f"{user}-{index}") for index in range(orders)],
        [ListKey("taxi", user), ListKey("eats", user)],
    )


async def test_reads_of_one_turn_go_as_one_call_and_each_gets_its_own_answer():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    polls = {f"u{index}": poll_of(f"u{index}", index % 3 + 1) for index in range(6)}
    answers = await asyncio.gather(
        *(
            joined.read(
                orders,
                lists,
                # each forces its first order, and another user's order as well
                force=[
                    ForcedOrder(orders[0].service, orders[0].orderid, user),
                    ForcedOrder("taxi", "u0-0", user),
                ],
                force_per_minute=6,
            )
            for user, (orders, lists) in polls.items()
        )
    )
    assert len(store.calls) == 1
    for (user, (orders, _)), answer in zip(polls.items(), answers, strict=True):
        assert [(o.orderid, o.tags) for o in answer.orders] == [
            (o.orderid, {"echo": o.orderid}) for o in orders
        ]
        # each read gets its own forces' verdicts, in the order it sent them
        assert answer.forced == [True, user == "u0"]
        assert [(entry.service, entry.tag) for entry in answer.lists] == [
            ("taxi", user),
            ("eats", user),
        ]


async def test_no_call_passes_the_limits_of_one_order_tags_request():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    # 30 polls of 7 orders and 2 lists each: 14 of them fill a call's 100 orders, 8 its lists
    polls = [poll_of(f"u{index}", 7) for index in range(30)]
    answers = await asyncio.gather(*(joined.read(orders, lists) for orders, lists in polls))
    assert sum(orders for orders, _ in store.calls) == 30 * 7
    assert all(lists <= MAX_LISTS for _, lists in store.calls)
    assert len(store.calls) == 4  # 8 polls a call, by the lists
    assert [len(answer.orders) for answer in answers] == [7] * 30


async def test_reads_of_different_turns_are_not_held_for_each_other():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    for index in range(3):
        orders, lists = poll_of(f"u{index}", 1)
        await joined.read(orders, lists)
    assert len(store.calls) == 3


async def test_a_failed_call_fails_every_read_joined_in_it_and_no_later_one():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    store.down = True
    failed = await asyncio.gather(
        *(joined.read(*poll_of(f"u{index}", 2)) for index in range(5)), return_exceptions=True
    )
    assert all(isinstance(result, OrderTagsUnavailable) for result in failed)
    store.down = False
    answer = await joined.read(*poll_of("later", 2))
    assert len(answer.orders) == 2


async def test_a_read_given_up_on_leaves_the_others_answered():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    gone = asyncio.create_task(joined.read(*poll_of("gone", 2)))
    staying = asyncio.create_task(joined.read(*poll_of("staying", 2)))
    await asyncio.sleep(0)  # both joined the turn's call
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert [o.orderid for o in (await staying).orders] == ["staying-0", "staying-1"]
    await joined.close()


class HeldStore(EchoStore):
    """An EchoStore whose calls stay out until released: the moment a read comes while
    order_tags is busy with others. Records how many calls were out at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.out = 0
        self.most_out = 0
        self.called = asyncio.Condition()

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey] = (),
        *,
        force: Sequence[OrderKey] = (),
        force_per_minute: int = 0,
        deadline_s: float | None = None,
    ) -> TagsGetResponse:
        self.out += 1
        self.most_out = max(self.most_out, self.out)
        async with self.called:
            self.called.notify_all()
        try:
            await self.release.wait()
            return await super().read(orders, lists, force=force, force_per_minute=force_per_minute)
        finally:
            self.out -= 1


async def test_reads_that_come_while_calls_are_out_go_together_when_one_ends():
    store = HeldStore()
    joined = JoinedTagReads(store, max_in_flight=1, gather_s=0.0)  # type: ignore[arg-type]
    first = asyncio.create_task(joined.read(*poll_of("first", 1)))
    async with store.called:
        await store.called.wait_for(lambda: store.out == 1)
    # order_tags is busy with the first call: these wait for it, then go as one
    later = {
        f"u{index}": asyncio.create_task(joined.read(*poll_of(f"u{index}", 2)))
        for index in range(5)
    }
    await asyncio.sleep(0)
    assert len(store.calls) == 0 and store.out == 1
    store.release.set()
    assert [o.orderid for o in (await first).orders] == ["first-0"]
    for user, task in later.items():
        assert [o.orderid for o in (await task).orders] == [f"{user}-0", f"{user}-1"]
    assert store.most_out == 1
    assert store.calls == [(1, 2), (10, 10)]


async def test_reads_that_fill_a_call_go_at_once_however_many_calls_are_out():
    store = HeldStore()
    joined = JoinedTagReads(store, max_in_flight=1, gather_s=0.0)  # type: ignore[arg-type]
    first = asyncio.create_task(joined.read(*poll_of("first", 1)))
    async with store.called:
        await store.called.wait_for(lambda: store.out == 1)
    # 20 polls of 2 lists each: two full calls of 8 (order_tags' lists per call), and 4 polls
    # that wait for a call to end
    polls = [poll_of(f"u{index}", 1) for index in range(20)]
    reads = [asyncio.create_task(joined.read(orders, lists)) for orders, lists in polls]
    async with store.called:
        await store.called.wait_for(lambda: store.out == 3)
    assert store.calls == []
    store.release.set()
    answers = await asyncio.gather(first, *reads)
    assert [answer.orders[0].orderid for answer in answers[1:]] == [f"u{i}-0" for i in range(20)]
    assert sorted(store.calls) == [(1, 2), (4, 8), (8, 16), (8, 16)]
    await joined.close()


def answers_of(user: str, size: int = 100) -> list[KeptAnswerOut]:
    answer = msgspec.Raw(b'{"pad": "' + b"x" * size + b'"}')
    return [KeptAnswerOut(s, user, "t", answer, 30_000) for s in ("taxi", "eats", "grocery")]


async def test_answers_kept_in_one_turn_go_as_one_call_within_its_limits():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    # 7 polls of 3 answers: 21, in calls of at most 16
    await asyncio.gather(*(joined.keep_answers(answers_of(f"u{i}")) for i in range(7)))
    assert [len(call) for call in store.keeps] == [16, 5]
    kept = [pair for call in store.keeps for pair in call]
    assert sorted(kept) == sorted(
        (f"u{i}", s) for i in range(7) for s in ("taxi", "eats", "grocery")
    )
    # big answers: as many as fit order_tags' body limit in one call
    store.keeps.clear()
    big = KEEP_CALL_BYTES // 5
    await asyncio.gather(*(joined.keep_answers(answers_of(f"b{i}", big)) for i in range(2)))
    assert [len(call) for call in store.keeps] == [4, 2]


async def test_a_failed_keep_call_fails_every_keep_joined_in_it():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    store.down = True
    failed = await asyncio.gather(
        *(joined.keep_answers(answers_of(f"u{i}")) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(result, OrderTagsUnavailable) for result in failed)
    assert len(store.keeps) == 1
    store.down = False
    await joined.keep_answers(answers_of("later"))
    await joined.close()


async def test_one_answer_order_tags_refuses_does_not_cost_the_others_their_keep():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.0)  # type: ignore[arg-type]
    store.refuse_user = "u1"
    results = await asyncio.gather(
        *(joined.keep_answers(answers_of(f"u{i}")) for i in range(3)), return_exceptions=True
    )
    # the joined call was refused, and each answer sent again alone: all but u1's kept
    assert any(isinstance(result, OrderTagsRejected) for result in results)
    assert sorted(store.kept) == sorted(
        (f"u{i}", s) for i in (0, 2) for s in ("taxi", "eats", "grocery")
    )
    await joined.close()


async def test_a_lone_read_goes_out_at_once_and_reads_that_follow_it_gather():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=60.0)  # type: ignore[arg-type]
    # no read came within the gather time: this one is not held for it (it would be held a
    # minute here), so paced polls pay neither the wait nor the timer
    first = await asyncio.wait_for(joined.read(*poll_of("first", 1)), timeout=5)
    assert [o.orderid for o in first.orders] == ["first-0"]
    # one that comes within the gather time of it gathers
    second = asyncio.create_task(joined.read(*poll_of("second", 1)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not second.done()
    await asyncio.wait_for(joined.close(), timeout=5)
    assert [o.orderid for o in (await second).orders] == ["second-0"]
    assert store.calls == [(1, 2), (1, 2)]


async def test_reads_of_different_turns_within_the_gather_time_go_as_one_call():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=0.05)  # type: ignore[arg-type]
    # reads come often: the one before these went out alone, these gather
    await joined.read(*poll_of("before", 1))
    reads = []
    for index in range(4):
        reads.append(asyncio.create_task(joined.read(*poll_of(f"u{index}", 1))))
        await asyncio.sleep(0)  # the next read comes a turn later
    answers = await asyncio.gather(*reads)
    assert store.calls == [(1, 2), (4, 8)]
    assert [a.orders[0].orderid for a in answers] == [f"u{i}-0" for i in range(4)]
    # a read that gathers is not held past the gather time
    alone = await joined.read(*poll_of("alone", 1))
    assert [o.orderid for o in alone.orders] == ["alone-0"]
    assert store.calls == [(1, 2), (4, 8), (1, 2)]


async def test_closing_sends_a_read_still_gathering_and_answers_it():
    store = EchoStore()
    joined = JoinedTagReads(store, max_in_flight=0, gather_s=60.0)  # type: ignore[arg-type]
    await joined.read(*poll_of("before", 1))  # reads come often: the next one gathers
    read = asyncio.create_task(joined.read(*poll_of("last", 1)))
    await asyncio.sleep(0)  # joined a batch that gathers for a minute
    await asyncio.wait_for(joined.close(), timeout=5)
    assert [o.orderid for o in (await read).orders] == ["last-0"]

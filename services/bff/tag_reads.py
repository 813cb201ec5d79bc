"""Tag reads of concurrent polls joined into one order_tags call (request coalescing, as a
DataLoader does): the polls that reach their tag read in the same turn of the event loop share
one request, up to order_tags' limits per request. The call goes out on the loop's next turn,
or, when another read came within `gather_s` or a call is out (reads come often enough to
join), `gather_s` after the first read joined it, unless `max_in_flight` calls are out already:
then the reads that come meanwhile gather and go out together as soon as one of those calls
is answered, or at once when they fill a call (adaptive batching: a read waits at most the
gather time or one call's round trip). Under load one order_tags request (one HTTP exchange,
one Redis round trip per shard) serves many polls, which is most of what a poll with nothing
new costs order_tags and this process's HTTP client. The answers a poll keeps are joined the
same way, per turn."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.bff.ports import TagStore
from shared.errors import OrderTagsRejected
from shared.wire import (
    MAX_BATCH,
    MAX_LISTS,
    ForcedOrder,
    KeptAnswerOut,
    ListKey,
    OrderKey,
    OrderParts,
    TagsGetResponse,
)


@dataclass
class _Reader:
    orders: Sequence[OrderKey]
    lists: Sequence[ListKey]
    force: Sequence[ForcedOrder]
    answered: asyncio.Future[TagsGetResponse]


@dataclass
class _Batch:
    force_per_minute: int
    deadline_s: float | None
    # no longer gathering reads: it goes out once a call may
    gathered: bool
    readers: list[_Reader] = field(default_factory=list)
    orders: int = 0
    lists: int = 0

    def fits(
        self, orders: Sequence[OrderKey], lists: Sequence[ListKey], force_per_minute: int
    ) -> bool:
        return (
            self.orders + len(orders) <= MAX_BATCH
            and self.lists + len(lists) <= MAX_LISTS
            and self.force_per_minute == force_per_minute
        )


# the answers of one keep call at most, in bytes: within order_tags' body limit (64 KiB) with
# room for the envelope
KEEP_CALL_BYTES = 48 * 1024


@dataclass
class _Keeping:
    done: asyncio.Future[None]
    deadline_s: float | None
    answers: list[KeptAnswerOut] = field(default_factory=list)


class JoinedTagReads:
    """A TagStore whose reads of one turn of the loop go out as one call; its other calls pass
    through. A failed call fails every read joined in it, as each would have failed alone."""

    def __init__(self, store: TagStore, *, max_in_flight: int, gather_s: float) -> None:
        self.store = store
        # a part-filled batch goes out no sooner than this after its first read: the reads
        # of that time join it (0: the next turn of the loop)
        self.gather_s = gather_s
        # when the last read came (the loop's clock): a read within the gather time of it
        # gathers, one after a quiet spell goes out at once
        self._last_read_at = float("-inf")
        # 0: no limit, every turn's reads go out at once
        self.max_in_flight = max_in_flight
        # the batch that reads join now, and full ones waiting for a call to end
        self._open: _Batch | None = None
        self._full: deque[_Batch] = deque()
        self._dispatch_due = False
        # the answers to keep that this turn's polls gave, and the keep calls out
        self._keeping: _Keeping | None = None
        self._keeps_sending: set[asyncio.Task[None]] = set()
        # the calls in flight: kept until done (a task nobody holds may be collected)
        self._sending: set[asyncio.Task[None]] = set()

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey] = (),
        *,
        force: Sequence[ForcedOrder] = (),
        force_per_minute: int = 0,
        deadline_s: float | None = None,
    ) -> TagsGetResponse:
        if len(orders) > MAX_BATCH or len(lists) > MAX_LISTS:
            # more than one call takes: as asked, order_tags says no
            return await self.store.read(
                orders,
                lists,
                force=force,
                force_per_minute=force_per_minute,
                deadline_s=deadline_s,
            )
        loop = asyncio.get_running_loop()
        batch = self._open
        if batch is None or not batch.fits(orders, lists, force_per_minute):
            if batch is not None:
                self._full.append(batch)
            now = loop.time()
            # gathering pays only when reads come closer than the gather time or a call is
            # out: a lone read (paced polls) goes on the next turn, which spares it the wait
            # and the process the timer's wakeup
            gather = bool(self.gather_s) and (
                bool(self._sending) or now - self._last_read_at < self.gather_s
            )
            batch = self._open = _Batch(force_per_minute, deadline_s, gathered=not gather)
            if gather:
                loop.call_later(self.gather_s, self._gathered, batch)
        self._last_read_at = loop.time()
        reader = _Reader(orders, lists, force, loop.create_future())
        batch.readers.append(reader)
        batch.orders += len(orders)
        batch.lists += len(lists)
        self._dispatch_soon()
        return await reader.answered

    def _gathered(self, batch: _Batch) -> None:
        # the timer's firing is the moment, not the loop's clock (a timer may fire a little
        # before its time by the clock)
        batch.gathered = True
        self._dispatch_soon()

    def _dispatch_soon(self) -> None:
        """On the loop's next turn: the reads of this turn join first."""
        if not self._dispatch_due:
            self._dispatch_due = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_due = False
        # a full batch gains nothing by waiting: the limit and the gather time only let a
        # part-filled one gather more, so they never cap how many reads order_tags is sent
        while self._full:
            self._start(self._full.popleft())
        batch = self._open
        if (
            batch is not None
            and (not self.max_in_flight or len(self._sending) < self.max_in_flight)
            and batch.gathered
        ):
            self._open = None
            self._start(batch)

    def _start(self, batch: _Batch) -> None:
        task = asyncio.create_task(self._call(batch))
        self._sending.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        if self._open is not None:
            self._dispatch_soon()

    async def _call(self, batch: _Batch) -> None:
        readers = [reader for reader in batch.readers if not reader.answered.done()]
        if not readers:
            return
        try:
            response = await self.store.read(
                [order for reader in readers for order in reader.orders],
                [one for reader in readers for one in reader.lists],
                force=[order for reader in readers for order in reader.force],
                force_per_minute=batch.force_per_minute,
                deadline_s=batch.deadline_s,
            )
        except Exception as exc:
            for reader in readers:
                if not reader.answered.done():
                    reader.answered.set_exception(exc)
            return
        except BaseException:
            for reader in readers:
                reader.answered.cancel()
            raise
        orders_at = lists_at = forced_at = 0
        for reader in readers:
            orders_end, lists_end = orders_at + len(reader.orders), lists_at + len(reader.lists)
            forced_end = forced_at + len(reader.force)
            if not reader.answered.done():
                reader.answered.set_result(
                    TagsGetResponse(
                        orders=response.orders[orders_at:orders_end],
                        lists=response.lists[lists_at:lists_end],
                        forced=response.forced[forced_at:forced_end],
                    )
                )
            orders_at, lists_at, forced_at = orders_end, lists_end, forced_end

    async def keep_answers(
        self, answers: Sequence[KeptAnswerOut], *, deadline_s: float | None = None
    ) -> None:
        """Kept with the answers of the polls of this turn: one call for as many as one takes
        (wire.MAX_LISTS answers, KEEP_CALL_BYTES). Raises what the call raised, for all of
        them: a failed keep only means the next poll asks the sources again."""
        keeping = self._keeping
        if keeping is None:
            keeping = self._keeping = _Keeping(
                asyncio.get_running_loop().create_future(), deadline_s
            )
            asyncio.get_running_loop().call_soon(self._send_keeping, keeping)
        keeping.answers.extend(answers)
        # shielded: one poll's answer given up on does not give up the others'
        await asyncio.shield(keeping.done)

    def _send_keeping(self, keeping: _Keeping) -> None:
        self._keeping = None
        # not among the reads' calls: a keep never holds a read back
        task = asyncio.create_task(self._keep(keeping))
        self._keeps_sending.add(task)
        task.add_done_callback(self._keeps_sending.discard)

    async def _keep(self, keeping: _Keeping) -> None:
        calls: list[list[KeptAnswerOut]] = []
        call_bytes = 0
        for answer in keeping.answers:
            if (
                not calls
                or len(calls[-1]) >= MAX_LISTS
                or call_bytes + len(answer.answer) > KEEP_CALL_BYTES
            ):
                calls.append([])
                call_bytes = 0
            calls[-1].append(answer)
            call_bytes += len(answer.answer)
        results = await asyncio.gather(
            *(self._keep_call(call, keeping.deadline_s) for call in calls),
            return_exceptions=True,
        )
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            keeping.done.set_exception(failed)
            # retrieved here: no poll may be awaiting it any more
            keeping.done.exception()
        else:
            keeping.done.set_result(None)

    async def _keep_call(self, answers: list[KeptAnswerOut], deadline_s: float | None) -> None:
        """One keep call; refused (one answer order_tags will not keep: all or none), each
        answer again alone, so one user's answer never costs the others theirs. The BFF checks
        what order_tags checks before sending, so this is the rare disagreement between them."""
        try:
            await self.store.keep_answers(answers, deadline_s=deadline_s)
        except OrderTagsRejected:
            if len(answers) == 1:
                raise
            results = await asyncio.gather(
                *(self.store.keep_answers([one], deadline_s=deadline_s) for one in answers),
                return_exceptions=True,
            )
            failed = next((r for r in results if isinstance(r, BaseException)), None)
            if failed is not None:
                raise failed from None

    async def get(
        self, orders: Sequence[OrderKey], *, deadline_s: float | None = None
    ) -> dict[OrderKey, dict[str, str] | None]:
        return await self.store.get(orders, deadline_s=deadline_s)

    async def create(
        self, orders: Sequence[OrderParts], *, deadline_s: float | None = None
    ) -> dict[OrderKey, dict[str, str]]:
        return await self.store.create(orders, deadline_s=deadline_s)

    async def close(self) -> None:
        """Until the calls in flight, and the reads and keeps gathered behind them, are done."""
        while self._sending or self._full or self._open is not None or self._keeping:
            if self._open is not None:
                # no more gathering: it goes out now
                self._open.gathered = True
            if not self._sending:
                self._dispatch()
            if self._keeping is not None:
                self._send_keeping(self._keeping)
            await asyncio.gather(*self._sending, *self._keeps_sending, return_exceptions=True)
        await asyncio.gather(*self._keeps_sending, return_exceptions=True)

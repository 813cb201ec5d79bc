"""The tag store in memory: order_tags and its Redis as the BFF and the writers see them
(services/bff/ports.py: TagStore), with the pub/sub that wakes waiting polls.

It keeps what the real one keeps, as it keeps it (services/order_tags/storage.py): each
order's parts with when its first tag was written and whose order it is; each user's list
tag, made by the first read that finds none; each kept source answer under the list tag it was
kept with, expiring after its own age; each force count per order and user over a minute from
the first force counted, counted only on an order whose owner is the forcing user. Every write
that changes something is published on the order's channel, a list bump on the list's channel.

The same Redis keeps the shared part cache's hashes (services/bff/part_cache.py): `redis`
answers the commands its client sends (HGET, and PUT_SCRIPT as the script keeps it), so every
replica's real RedisPartCache shares one set of entries, lost, failing and flushed with the
tags.

Faults: down (every call fails at once, as order_tags answering 503, and the part cache's
commands with a lost connection), paused (every call waits for the client's deadline and
fails, as a Redis stopped with SIGSTOP), flushed (all data gone at once, part data too),
messages lost on their way to subscribers. The pub/sub connections are the wake-up hubs'
(devtools/simulation/wakeups.py); they are lost with Redis."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from devtools.simulation.part_cache_redis import PartHash, StoreRedis
from shared.errors import OrderTagsUnavailable
from shared.redis import list_channel, tags_channel
from shared.upstream_wire import SourceResponse
from shared.wire import (
    ForcedOrder,
    KeptAnswer,
    KeptAnswerOut,
    ListEntry,
    ListKey,
    OrderKey,
    OrderParts,
    OrderTags,
    TagsGetResponse,
)

# the window of an order's force budget, as order_tags counts it
FORCE_WINDOW_MS = 60_000
# the client's deadline for a call to order_tags (services/bff/config.py: tags_deadline_s)
CALL_DEADLINE_S = 0.05
# a published message reaches a subscriber this long after the write, plus up to the spread
MESSAGE_DELAY_S = 0.0005
MESSAGE_SPREAD_S = 0.001

_answer = msgspec.json.Decoder(SourceResponse)


class Subscriber(Protocol):
    """A pub/sub connection: told of each message published while it is connected."""

    def deliver(self, channel: str) -> None: ...

    def redis_lost(self) -> None: ...


@dataclass
class _Hash:
    parts: dict[str, str] = field(default_factory=dict)
    created_ms: int | None = None
    owner: str | None = None
    # when a create last made any of its tags
    made_ms: int | None = None


@dataclass
class _Kept:
    kept: KeptAnswer
    expires_ms: int


@dataclass(frozen=True)
class KeptRecord:
    """One answer kept, as the checks read it: when, for how long, for whom, what."""

    at_ms: int
    max_age_ms: int
    user_id: str
    service: str
    orderids: tuple[str, ...]


@dataclass(frozen=True)
class CreateRecord:
    """Tags made by a BFF for an order, naming its owner."""

    at_ms: int
    key: OrderKey
    owner: str | None


class SimTagStore:
    def __init__(self, rng: random.Random, now_ms: Callable[[], int]) -> None:
        self.rng = rng
        self.now_ms = now_ms
        self._orders: dict[OrderKey, _Hash] = {}
        self._lists: dict[ListKey, str] = {}
        self._kept: dict[ListKey, _Kept] = {}
        self._forces: dict[ForcedOrder, tuple[int, int]] = {}
        self._parts: dict[str, PartHash] = {}
        self._sequence = 0
        self.subscribers: list[Subscriber] = []
        # faults
        self.down = False
        self.paused = False
        self.message_loss = 0.0
        # (when, channel) of each message lost on its way: a held poll may miss that change
        self.lost_messages: list[tuple[float, str]] = []
        # when each channel last had a message published: a write after a poll was held rings it
        self.last_published: dict[str, float] = {}
        # what the checks read
        self.kept_log: list[KeptRecord] = []
        self.create_log: list[CreateRecord] = []
        self.flushes: list[int] = []
        # (order, part, content tag) → when that content tag was first written (loop time):
        # a part answered under it holds data at least as new as the order's then
        self.content_written: dict[tuple[OrderKey, str, str], float] = {}
        self.redis = StoreRedis(self)

    # --- faults -------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        return not self.down and not self.paused

    def flush(self) -> None:
        """Everything gone (FLUSHALL, or Redis back empty after a restart)."""
        self._orders.clear()
        self._lists.clear()
        self._kept.clear()
        self._forces.clear()
        self._parts.clear()
        self.flushes.append(self.now_ms())

    def lose_connections(self) -> None:
        """Redis went away: every pub/sub connection to it is lost."""
        for subscriber in self.subscribers:
            subscriber.redis_lost()

    async def _call(self) -> None:
        """One round trip: a millisecond or two, or the client's deadline and a failure."""
        if self.paused:
            await asyncio.sleep(CALL_DEADLINE_S)
            raise OrderTagsUnavailable("simulated order_tags: no answer within the deadline")
        await asyncio.sleep(0.0005 + self.rng.random() * 0.0015)
        if self.paused:
            # paused while the call was out: it waits out the rest of its deadline
            await asyncio.sleep(CALL_DEADLINE_S)
            raise OrderTagsUnavailable("simulated order_tags: no answer within the deadline")
        if self.down:
            raise OrderTagsUnavailable("simulated order_tags: down")

    def _tag(self, prefix: str) -> str:
        """A unique content tag (as new_content_tag makes them, without os.urandom: the
        same in every run of a seed)."""
        self._sequence += 1
        return f"{prefix}{self.now_ms():x}-{self._sequence:x}"

    def _publish(self, channel: str) -> None:
        loop = asyncio.get_running_loop()
        self.last_published[channel] = loop.time()
        for subscriber in self.subscribers:
            if self.message_loss and self.rng.random() < self.message_loss:
                self.lost_messages.append((loop.time(), channel))
                continue
            loop.call_later(
                MESSAGE_DELAY_S + self.rng.random() * MESSAGE_SPREAD_S, subscriber.deliver, channel
            )

    # --- the port: services/bff/ports.py TagStore --------------------------------------------

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey] = (),
        *,
        force: Sequence[ForcedOrder] = (),
        force_per_minute: int = 0,
        deadline_s: float | None = None,
    ) -> TagsGetResponse:
        await self._call()
        now = self.now_ms()
        forced: list[bool] = []
        for each in force:
            # as order_tags' scripts: a force on an order not the user's counts nowhere
            owned = self._orders.get(each.key)
            if owned is None or each.user_id is None or owned.owner != each.user_id:
                forced.append(False)
                continue
            started, count = self._forces.get(each, (now, 0))
            if now - started >= FORCE_WINDOW_MS:
                started, count = now, 0
            self._forces[each] = (started, count + 1)
            forced.append(count + 1 <= force_per_minute)
        honoured = {f.key for f, ok in zip(force, forced, strict=True) if ok}
        answered: list[OrderTags] = []
        for key in orders:
            stored = self._orders.get(key)
            if stored is None or not stored.parts:
                answered.append(OrderTags(key.service, key.orderid, None))
                continue
            answered.append(
                OrderTags(
                    key.service,
                    key.orderid,
                    dict(stored.parts),
                    stored.created_ms,
                    stored.owner,
                    key in honoured,
                    stored.made_ms,
                )
            )
        entries: list[ListEntry] = []
        for one in lists:
            tag = self._lists.get(one)
            if tag is None:
                tag = self._lists[one] = self._tag("l")
            kept = self._kept.get(one)
            if kept is not None and kept.expires_ms <= now:
                del self._kept[one]
                kept = None
            entries.append(
                ListEntry(one.service, one.user_id, tag, kept.kept if kept is not None else None)
            )
        return TagsGetResponse(answered, entries, forced)

    async def keep_answers(
        self, answers: Sequence[KeptAnswerOut], *, deadline_s: float | None = None
    ) -> None:
        await self._call()
        now = self.now_ms()
        for answer in answers:
            key = ListKey(answer.service, answer.user_id)
            kept = KeptAnswer(answer.tag, now, answer.answer)
            self._kept[key] = _Kept(kept, now + answer.max_age_ms)
            orderids = tuple(order.orderid for order in _answer.decode(answer.answer).orders)
            self.kept_log.append(
                KeptRecord(now, answer.max_age_ms, answer.user_id, answer.service, orderids)
            )

    async def get(
        self, orders: Sequence[OrderKey], *, deadline_s: float | None = None
    ) -> dict[OrderKey, dict[str, str] | None]:
        read = await self.read(orders)
        return {OrderKey(o.service, o.orderid): o.tags for o in read.orders}

    async def create(
        self, orders: Sequence[OrderParts], *, deadline_s: float | None = None
    ) -> dict[OrderKey, dict[str, str]]:
        await self._call()
        created: dict[OrderKey, dict[str, str]] = {}
        for order in orders:
            key = OrderKey(order.service, order.orderid)
            self.create_log.append(CreateRecord(self.now_ms(), key, order.user_id))
            # as order_tags makes them (shared.protocol.tags.made_tag): the order's version, or
            # a tag that says when it was made
            content = f"v{order.version}" if order.version is not None else ""
            created[key] = self._write(
                key, dict.fromkeys(order.parts, content), order.user_id, True
            )
        return created

    # --- the writers' calls (order_tags' set, bump, delete, lists/bump) ------------------------

    def _write(
        self, key: OrderKey, parts: dict[str, str], owner: str | None, only_if_absent: bool
    ) -> dict[str, str]:
        """As SET_TAGS_SCRIPT: the parts written (an empty content: a new tag made for it),
        when the order's first tag was written, its owner kept from the first write that
        names one, and the change published."""
        stored = self._orders.setdefault(key, _Hash())
        had_parts = bool(stored.parts)
        changed = False
        for part, content in parts.items():
            if only_if_absent and part in stored.parts:
                continue
            stored.parts[part] = content or self._tag("n" if only_if_absent else "b")
            self.content_written.setdefault(
                (key, part, stored.parts[part]), asyncio.get_running_loop().time()
            )
            changed = True
        # the first writer that says whose order it is names it, also where it writes no part
        if stored.owner is None and owner and stored.parts:
            stored.owner = owner
        if changed:
            if stored.created_ms is None:
                stored.created_ms = self.now_ms()
            # as SET_TAGS_SCRIPT: a create that made the order's tags from nothing notes when,
            # a feature's write that changes one takes the note away, and a create adding
            # parts to an order that has some leaves the note as it is
            if not only_if_absent:
                stored.made_ms = None
            elif not had_parts:
                stored.made_ms = self.now_ms()
            self._publish(tags_channel(key.service, key.orderid))
        return dict(stored.parts)

    async def set_tags(
        self, service: str, orderid: str, parts: Sequence[str], *, owner: str | None
    ) -> None:
        """New tags for these parts of a new order, naming its owner."""
        await self._call()
        self._write(OrderKey(service, orderid), dict.fromkeys(parts, ""), owner, False)

    async def bump(self, service: str, orderid: str, parts: Sequence[str]) -> None:
        await self._call()
        self._write(OrderKey(service, orderid), dict.fromkeys(parts, ""), None, False)

    async def delete(self, service: str, orderid: str) -> None:
        await self._call()
        if self._orders.pop(OrderKey(service, orderid), None) is not None:
            self._publish(tags_channel(service, orderid))

    async def bump_list(self, service: str, user_id: str) -> str:
        await self._call()
        tag = self._lists[ListKey(service, user_id)] = self._tag("l")
        self._publish(list_channel(service, user_id))
        return tag

    # --- what the checks read ------------------------------------------------------------

    def content(self, key: OrderKey) -> dict[str, str] | None:
        stored = self._orders.get(key)
        return dict(stored.parts) if stored is not None and stored.parts else None

    def owner(self, key: OrderKey) -> str | None:
        """The owner the order's tags name (None: none, e.g. made again by a writer's bump
        after a flush)."""
        stored = self._orders.get(key)
        return stored.owner if stored is not None else None

"""Content tags in Redis: one hash per order, `tags:{<service>:<orderid>}` → part → content."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import RedisError, ResponseError

from services.order_tags.hedging import Hedging
from services.order_tags.scripts import (
    BUMP_LIST_SCRIPT,
    DELETE_TAGS_SCRIPT,
    FORCE_SCRIPT,
    READ_ALL_SCRIPT,
    READ_LIST_SCRIPT,
    SET_TAGS_SCRIPT,
)
from shared.errors import BadRequest, RedisUnavailable
from shared.protocol.tags import made_tag, new_content_tag, new_content_tags
from shared.redis import RedisClient, force_key, kept_answer_key, list_key, tags_key
from shared.wire import MAX_PARTS, ForcedOrder, ListKey, OrderKey

T = TypeVar("T")

# the hash fields beside the parts (the scripts name them too)
CREATED_FIELD = "_created"
OWNER_FIELD = "_owner"
# when a create last made any of an order's tags (scripts.SET_TAGS_SCRIPT)
MADE_FIELD = "_made"


class KeptEntry(NamedTuple):
    """A source's answer as kept for one user's list (wire.KeptAnswer, encoded)."""

    service: str
    user_id: str
    kept: bytes
    max_age_s: float


# the window of an order's force budget
FORCE_WINDOW_S = 60


def _force_keys(forced: ForcedOrder) -> list[str]:
    """A forced order's hash and its user's force count of it: one hash tag, one slot, so one
    script checks the owner and counts (on a cluster too)."""
    return [
        tags_key(forced.service, forced.orderid),
        force_key(forced.service, forced.orderid, forced.user_id),
    ]


def _honoured(
    forced: Sequence[ForcedOrder], counts: Sequence[int], force_per_minute: int
) -> set[ForcedOrder]:
    """The forced orders within their budget; a count of 0 is a force on an order not the
    user's, counted nowhere."""
    return {
        order for order, count in zip(forced, counts, strict=True) if 0 < count <= force_per_minute
    }


class StoredOrder(NamedTuple):
    """An order's hash as read."""

    # part → content tag; None when the order has none
    parts: dict[str, str] | None
    # when its first tag was written (unix ms)
    created_ms: int | None
    # whose order it is, when the writer said
    owner: str | None
    # when a create last made any of its tags (unix ms)
    made_ms: int | None = None


class StoredList(NamedTuple):
    """A user's list of one service as read."""

    # its list tag (made by the read when it had none)
    tag: str
    # the source's answer kept under some list tag (wire.KeptAnswer, encoded), if any
    kept: str | None


class StoredRead(NamedTuple):
    """One read of the tag store: each order's hash and each list, in the order asked, and
    the forced orders within their budget."""

    orders: list[StoredOrder]
    lists: list[StoredList]
    honoured: set[ForcedOrder]


def split_created(stored: dict[str, str] | None) -> StoredOrder:
    """An order's hash as its parts, when its first tag was written, its owner, and when a
    create last made any of its tags."""
    if not stored:
        return StoredOrder(None, None, None)
    created = stored.pop(CREATED_FIELD, None)
    owner = stored.pop(OWNER_FIELD, None)
    made = stored.pop(MADE_FIELD, None)
    created_ms = int(created) if created is not None and created.isdigit() else None
    made_ms = int(made) if made is not None and made.isdigit() else None
    return StoredOrder(stored or None, created_ms, owner, made_ms)


_TOO_MANY_PARTS = re.compile(r"too_many_parts (\d+) (\d+)")


def _too_many_parts(exc: ResponseError) -> BadRequest | None:
    """The script's refusal of a write past MAX_PARTS, as the client's error; None for any
    other error Redis answered."""
    # a pipeline's error names its command before the script's words
    refused = _TOO_MANY_PARTS.search(str(exc))
    if refused is None:
        return None
    stored, new = refused.groups()
    return BadRequest(
        f"an order has at most {MAX_PARTS} parts: it has {stored}, and the write adds {new};"
        " nothing was written",
        code="too_many_parts",
    )


# what a write may take per part it writes, beyond one call's deadline, and before a hedge:
# a script's work and this process's packing and parsing grow with the parts. Without it the
# largest create (100 orders of 32 parts) was hedged as if silent and, on a loaded machine,
# answered 503 at the deadline although every order was written; it allows about five times
# what a part took unloaded (docs/capacity.md: Where the code's numbers come from)
PER_PART_S = 50e-6

# connections reopened at once after hedges (each at most _REOPEN_S): a Redis that is gone
# costs a few connection attempts in the background, not one per hedge
_REOPENING_MAX = 4
_REOPEN_S = 1.0


class RedisTagStore:
    """The tag store over Redis (the BFF sees it through order_tags' HTTP API as its
    `services.bff.ports.TagStore`)."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        ttl_s: int,
        deadline_s: float,
        publish: bool = True,
        hedge_after_s: float = 0.0,
        on_hedge: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self.deadline_s = deadline_s
        # a call with no answer soon is sent again on another connection, inside the deadline:
        # a lost packet costs a few milliseconds, not TCP's 200 ms retransmit (hedging.py)
        self.hedging = Hedging(hedge_after_s, on_hedge=on_hedge, on_loser=self._reopen_soon)
        self._reopening: set[asyncio.Task[None]] = set()
        # off only to measure what publishing costs (benchmarks/order_tags_publish.py)
        self.publish = publish
        # a single Redis reads in one command; a cluster, a pipeline of commands per shard
        self.single = not isinstance(redis, RedisCluster)
        self._set_script = redis.register_script(SET_TAGS_SCRIPT)
        self._delete_script = redis.register_script(DELETE_TAGS_SCRIPT)
        self._bump_list_script = redis.register_script(BUMP_LIST_SCRIPT)
        # EVALSHA: the script's ~1 KB body is not packed and sent on every read; a Redis
        # that does not know it (restarted) answers NOSCRIPT, and the Script loads it and
        # runs it again
        self._read_all_script = redis.register_script(READ_ALL_SCRIPT)

    def _reopen_soon(self) -> None:
        """A hedge's losing attempt closed its connection and put it back on top of the pool
        (which hands out the last one put back): opened again now, off any call's path, it is
        no stall (a handshake and a round trip over the lossy link) for the next call: fewer
        hedges per call on a lossy link (docs/capacity.md: Where the code's numbers come
        from). A cluster's pools are its nodes': not done there."""
        if isinstance(self.redis, RedisCluster) or len(self._reopening) >= _REOPENING_MAX:
            return
        task = asyncio.ensure_future(self._reopen(self.redis))
        self._reopening.add(task)
        task.add_done_callback(self._reopening.discard)

    async def _reopen(self, redis: Redis) -> None:
        pool = redis.connection_pool
        # a connection whose handshake is lost is given up: the next call opens it
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            async with asyncio.timeout(_REOPEN_S):
                connection = await pool.get_connection()  # type: ignore[no-untyped-call]
                await pool.release(connection)

    async def _run(
        self, operation: Callable[[], Awaitable[T]], *, hedge: bool = True, parts: int = 0
    ) -> T:
        """`operation` within the deadline, hedged unless `hedge` is False. A hedge's losing
        attempt may still run, late: TCP resends its lost packet after 200 ms or more. So only
        calls that may run twice and late are hedged: reads (a read's force count is the one
        exception: counted twice it honours fewer forces, never more) and writes a late run
        cannot undo (a create only where absent, a kept answer under its own tag). A delete's
        answer would change, and a late set, bump or list bump would put back a tag a newer
        write replaced: a client holding it would never fetch the newer data. `parts`: how
        many parts a write writes; its deadline and its hedge wait PER_PART_S more for each,
        so that a large write that succeeds is not answered 503 for its size."""
        work_s = parts * PER_PART_S
        try:
            async with asyncio.timeout(self.deadline_s + work_s):
                if hedge:
                    return await self.hedging.run(operation, work_s=work_s)
                return await operation()
        except ResponseError as exc:
            too_many = _too_many_parts(exc)
            if too_many is None:
                raise RedisUnavailable(f"Redis refused the command: {exc!r}") from exc
            raise too_many from exc
        except (RedisError, OSError, TimeoutError) as exc:
            raise RedisUnavailable(f"Redis did not answer: {exc!r}") from exc

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey],
        force: Sequence[ForcedOrder] = (),
        force_per_minute: int = 0,
    ) -> StoredRead:
        """The orders' tags (and when each order's first tag was written), each list's tag
        (made now when it has none) and kept answer, and which forced orders are within their
        budget, in one pipeline: one round trip per shard. A list's tag and its kept answer
        share a hash tag: one shard; so do an order's tags and its force counts.

        A force counts against the budget only on an order whose hash names the forcing user
        its owner, checked where it is counted: a force on an order that does not exist, or
        is another's (or with no user to check), is not honoured and writes nothing. What a
        client can make the store keep is bounded by what it owns."""
        forced = [each for each in dict.fromkeys(force) if each.user_id is not None]
        if self.single:
            return await self._run(lambda: self._read_all(orders, lists, forced, force_per_minute))

        async def operation() -> StoredRead:
            pipe = self.redis.pipeline(transaction=False)
            for order in orders:
                pipe.hgetall(tags_key(order.service, order.orderid))
            for each in forced:
                # a minute from the first force counted: at most force_per_minute honoured
                # in it, by every replica together. EVAL: see the lists' below
                user = each.user_id or ""  # never empty: forced orders with no user are out
                pipe.eval(FORCE_SCRIPT, 2, *_force_keys(each), user, FORCE_WINDOW_S)
            for one, new_tag in zip(lists, new_content_tags(len(lists)), strict=True):
                # the list tag, or a new one if there is none: a source's answer is kept only
                # under a tag read before the source is asked
                tag, kept = (
                    list_key(one.service, one.user_id),
                    kept_answer_key(one.service, one.user_id),
                )
                # EVAL, not EVALSHA: a script never loaded on a node (a restart, a new
                # master) is no error; Redis keeps the compiled script by its digest
                pipe.eval(READ_LIST_SCRIPT, 2, tag, kept, new_tag, self.ttl_s)
            results = await pipe.execute()
            tags = [split_created(stored) for stored in results[: len(orders)]]
            counts = results[len(orders) : len(orders) + len(forced)]
            listed = [
                StoredList(tag, kept or None) for tag, kept in results[len(orders) + len(forced) :]
            ]
            return StoredRead(tags, listed, _honoured(forced, counts, force_per_minute))

        return await self._run(operation)

    async def _read_all(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey],
        forced: Sequence[ForcedOrder],
        force_per_minute: int,
    ) -> StoredRead:
        """`read` on a single Redis: one command."""
        keys = [tags_key(order.service, order.orderid) for order in orders]
        for each in forced:
            keys += _force_keys(each)
        for one in lists:
            keys += [list_key(one.service, one.user_id), kept_answer_key(one.service, one.user_id)]
        args: list[str | int] = [len(orders), len(forced), FORCE_WINDOW_S, self.ttl_s]
        args += [each.user_id or "" for each in forced]
        args += new_content_tags(len(lists))
        hashes, counts, listed = await self._read_all_script(keys=keys, args=args)
        tags = [split_created(dict(zip(flat[::2], flat[1::2], strict=True))) for flat in hashes]
        return StoredRead(
            tags,
            [StoredList(tag, kept or None) for tag, kept in listed],
            _honoured(forced, counts, force_per_minute),
        )

    async def bump_list(self, service: str, user_id: str) -> str:
        """A new list tag: what the source lists for the user changed. Published on the
        list's channel, so polls waiting for the user wake."""
        tag = new_content_tag()

        async def operation() -> str:
            key = list_key(service, user_id)
            await self._bump_list_script(keys=[key], args=[tag, self.ttl_s, int(self.publish)])
            return tag

        return await self._run(operation, hedge=False)

    async def keep_answers(self, entries: Sequence[KeptEntry]) -> None:
        """Sources' answers (each with the list tag it is kept under), each for its max age:
        one pipeline, one round trip per shard."""

        async def operation() -> None:
            pipe = self.redis.pipeline(transaction=False)
            for entry in entries:
                pipe.set(
                    kept_answer_key(entry.service, entry.user_id),
                    entry.kept,
                    px=max(1, int(entry.max_age_s * 1000)),
                )
            await pipe.execute()

        await self._run(operation)

    async def set(
        self,
        service: str,
        orderid: str,
        tags: Mapping[str, str],
        *,
        only_if_absent: bool,
        owner: str | None = None,
    ) -> dict[str, str]:
        """Write just these parts and refresh the TTL, atomically; return what is stored now.
        `owner`: the user whose order it is, kept from the order's first write."""
        key = tags_key(service, orderid)
        args: list[str | int] = [
            self.ttl_s,
            int(only_if_absent),
            int(self.publish),
            owner or "",
            MAX_PARTS,
        ]
        for part, content in tags.items():
            args += [part, content]

        async def operation() -> dict[str, str]:
            flat = await self._set_script(keys=[key], args=args)
            return split_created(dict(zip(flat[::2], flat[1::2], strict=True))).parts or {}

        return await self._run(operation, hedge=False, parts=len(tags))

    async def create_many(
        self, orders: Sequence[tuple[OrderKey, Sequence[str], str | None, int | None]]
    ) -> list[dict[str, str]]:
        """Content tags for these parts of many orders, each only where absent (a feature's
        tag written meanwhile wins), in one pipeline: one round trip. Returns what each order
        stores afterwards. Each order is its own atomic script: on a cluster the pipeline is
        split by shard, and the orders' keys are on many. The third of each is whose order it
        is, kept if it is the order's first write; the fourth its version, which the tags
        made carry (shared.protocol.tags.made_tag)."""

        async def operation() -> list[dict[str, str]]:
            pipe = self.redis.pipeline(transaction=False)
            for order, parts, owner, version in orders:
                args: list[str | int] = [self.ttl_s, 1, int(self.publish), owner or "", MAX_PARTS]
                for part in dict.fromkeys(parts):
                    args += [part, made_tag(version)]
                pipe.eval(SET_TAGS_SCRIPT, 1, tags_key(order.service, order.orderid), *args)
            results: list[list[str]] = await pipe.execute()
            return [
                split_created(dict(zip(flat[::2], flat[1::2], strict=True))).parts or {}
                for flat in results
            ]

        return await self._run(operation, parts=sum(len(parts) for _, parts, _, _ in orders))

    async def bump(self, service: str, orderid: str, parts: Sequence[str]) -> dict[str, str]:
        """New unique content tags for these parts; returns them."""
        new_tags = {part: new_content_tag() for part in parts}
        await self.set(service, orderid, new_tags, only_if_absent=False)
        return new_tags

    async def delete(self, service: str, orderid: str) -> bool:
        async def operation() -> bool:
            keys = [tags_key(service, orderid)]
            return bool(await self._delete_script(keys=keys, args=[int(self.publish)]))

        return await self._run(operation, hedge=False)

    async def ping(self) -> bool:
        try:
            # hedged too: a lossy link must not make the service look down to its probes
            async with asyncio.timeout(self.deadline_s):
                return bool(await self.hedging.run(self.redis.ping))
        except (RedisError, OSError, TimeoutError):
            return False

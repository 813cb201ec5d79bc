"""Content tags in Redis: one hash per order, `tags:{<service>:<orderid>}` → part → content."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from redis.exceptions import RedisError

from shared.errors import RedisUnavailable
from shared.protocol.tags import new_content_tag
from shared.redis import RedisClient, tags_key
from shared.wire import OrderKey

T = TypeVar("T")


# One command, so atomic on a single Redis and on a cluster alike (the key is one slot).
# KEYS[1]: the order's hash; ARGV: ttl, only_if_absent (0/1), publish (0/1), then part,
# content pairs. The parts whose content really changed are published on the order's channel
# (its key's name, so SPUBLISH stays on the key's shard): a waiting poll wakes for a change,
# not for a write that changed nothing (a missing tag created twice, the same tag set again).
SET_TAGS_SCRIPT = """
local only_if_absent = ARGV[2] == "1"
local changed = {}
for i = 4, #ARGV, 2 do
  local old = redis.call("HGET", KEYS[1], ARGV[i])
  if old ~= ARGV[i + 1] and not (only_if_absent and old) then
    redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1])
    changed[#changed + 1] = ARGV[i]
  end
end
redis.call("EXPIRE", KEYS[1], ARGV[1])
if ARGV[3] == "1" and #changed > 0 then
  redis.call("SPUBLISH", KEYS[1], table.concat(changed, ","))
end
return redis.call("HGETALL", KEYS[1])
"""

# KEYS[1]: the order's hash; ARGV[1]: publish (0/1). "*": every part of the order is gone.
DELETE_TAGS_SCRIPT = """
local deleted = redis.call("DEL", KEYS[1])
if ARGV[1] == "1" and deleted > 0 then
  redis.call("SPUBLISH", KEYS[1], "*")
end
return deleted
"""


class TagStore:
    def __init__(
        self, redis: RedisClient, *, ttl_s: int, deadline_s: float, publish: bool = True
    ) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self.deadline_s = deadline_s
        # off only to measure what publishing costs (benchmarks/order_tags_publish.py)
        self.publish = publish
        self._set_script = redis.register_script(SET_TAGS_SCRIPT)
        self._delete_script = redis.register_script(DELETE_TAGS_SCRIPT)

    async def _run(self, operation: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self.deadline_s):
                return await operation()
        except (RedisError, OSError, TimeoutError) as exc:
            raise RedisUnavailable(f"Redis did not answer: {exc!r}") from exc

    async def get_many(self, orders: Sequence[OrderKey]) -> list[dict[str, str] | None]:
        """All orders' tags in one pipeline: one round trip for the whole batch."""

        async def operation() -> list[dict[str, str] | None]:
            pipe = self.redis.pipeline(transaction=False)
            for order in orders:
                pipe.hgetall(tags_key(order.service, order.orderid))
            results: list[dict[str, str]] = await pipe.execute()
            return [tags or None for tags in results]

        return await self._run(operation)

    async def set(
        self, service: str, orderid: str, tags: Mapping[str, str], *, only_if_absent: bool
    ) -> dict[str, str]:
        """Write just these parts and refresh the TTL, atomically; return what is stored now."""
        key = tags_key(service, orderid)
        args: list[str | int] = [self.ttl_s, int(only_if_absent), int(self.publish)]
        for part, content in tags.items():
            args += [part, content]

        async def operation() -> dict[str, str]:
            flat = await self._set_script(keys=[key], args=args)
            return dict(zip(flat[::2], flat[1::2], strict=True))

        return await self._run(operation)

    async def create_many(
        self, orders: Sequence[tuple[OrderKey, Sequence[str]]]
    ) -> list[dict[str, str]]:
        """New unique content tags for these parts of many orders, each only where absent (a
        feature's tag written meanwhile wins), in one pipeline: one round trip. Returns what
        each order stores afterwards. Each order is its own atomic script: on a cluster the
        pipeline is split by shard, and the orders' keys are on many."""

        async def operation() -> list[dict[str, str]]:
            pipe = self.redis.pipeline(transaction=False)
            for order, parts in orders:
                args: list[str | int] = [self.ttl_s, 1, int(self.publish)]
                for part in parts:
                    args += [part, new_content_tag(created=True)]
                pipe.eval(SET_TAGS_SCRIPT, 1, tags_key(order.service, order.orderid), *args)
            results: list[list[str]] = await pipe.execute()
            return [dict(zip(flat[::2], flat[1::2], strict=True)) for flat in results]

        return await self._run(operation)

    async def bump(self, service: str, orderid: str, parts: Sequence[str]) -> dict[str, str]:
        """New unique content tags for these parts; returns them."""
        new_tags = {part: new_content_tag() for part in parts}
        await self.set(service, orderid, new_tags, only_if_absent=False)
        return new_tags

    async def delete(self, service: str, orderid: str) -> bool:
        async def operation() -> bool:
            keys = [tags_key(service, orderid)]
            return bool(await self._delete_script(keys=keys, args=[int(self.publish)]))

        return await self._run(operation)

    async def ping(self) -> bool:
        try:
            async with asyncio.timeout(self.deadline_s):
                return bool(await self.redis.ping())
        except (RedisError, OSError, TimeoutError):
            return False

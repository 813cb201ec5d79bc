"""Content tags in Redis: one hash per order, `tags:{<service>:<orderid>}` → part → content."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from redis.exceptions import RedisError

from shared.errors import RedisUnavailable
from shared.protocol.tags import new_content_tag
from shared.redis import RedisClient
from shared.wire import OrderKey

T = TypeVar("T")


def tags_key(service: str, orderid: str) -> str:
    # the braces make the pair a Redis Cluster hash tag: one order, one slot; orders spread
    return f"tags:{{{service}:{orderid}}}"


# One command, so atomic on a single Redis and on a cluster alike (the key is one slot).
# KEYS[1]: the order's hash; ARGV: ttl, only_if_absent (0/1), then part, content pairs.
SET_TAGS_SCRIPT = """
local only_if_absent = ARGV[2] == "1"
for i = 3, #ARGV, 2 do
  if only_if_absent then
    redis.call("HSETNX", KEYS[1], ARGV[i], ARGV[i + 1])
  else
    redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
redis.call("EXPIRE", KEYS[1], ARGV[1])
return redis.call("HGETALL", KEYS[1])
"""


class TagStore:
    def __init__(self, redis: RedisClient, *, ttl_s: int, deadline_s: float) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self.deadline_s = deadline_s
        self._set_script = redis.register_script(SET_TAGS_SCRIPT)

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
        args: list[str | int] = [self.ttl_s, int(only_if_absent)]
        for part, content in tags.items():
            args += [part, content]

        async def operation() -> dict[str, str]:
            flat = await self._set_script(keys=[key], args=args)
            return dict(zip(flat[::2], flat[1::2], strict=True))

        return await self._run(operation)

    async def bump(self, service: str, orderid: str, parts: Sequence[str]) -> dict[str, str]:
        """New unique content tags for these parts; returns them."""
        new_tags = {part: new_content_tag() for part in parts}
        await self.set(service, orderid, new_tags, only_if_absent=False)
        return new_tags

    async def delete(self, service: str, orderid: str) -> bool:
        async def operation() -> bool:
            return bool(await self.redis.delete(tags_key(service, orderid)))

        return await self._run(operation)

    async def ping(self) -> bool:
        try:
            async with asyncio.timeout(self.deadline_s):
                return bool(await self.redis.ping())
        except (RedisError, OSError, TimeoutError):
            return False

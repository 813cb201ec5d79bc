"""Users for the benchmarks: each with one driving taxi order, and the known order a client
that holds every part as stored would send (a poll with it has no news)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import aiohttp
import redis.asyncio as aioredis

from shared.policy import load_policy
from shared.protocol.tags import encode_tag
from shared.redis import tags_key

POLICY = load_policy()
TAG_DEFINED = ["fast_info", "rarely_changed", "static", "chat", "slow"]


async def caught_up_users(
    session: aiohttp.ClientSession, emulator: str, redis: aioredis.Redis, count: int, prefix: str
) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """(user, orderid) of each, and its known order with tags issued a minute ago."""
    # set-up writes a few at a time: a burst would miss order_tags' Redis deadline
    limit = asyncio.Semaphore(20)

    async def create(index: int) -> tuple[str, str]:
        user = f"{prefix}-{index}"
        async with (
            limit,
            session.post(
                f"{emulator}/emulator/v1/orders",
                json={"user_id": user, "service": "taxi", "status": "driving"},
            ) as response,
        ):
            return user, (await response.json())["orderid"]

    orders = await asyncio.gather(*(create(i) for i in range(count)))
    version = POLICY.version("taxi")
    issued = int(time.time() * 1000) - 60_000

    async def known(orderid: str) -> dict[str, Any]:
        async with limit:
            stored = cast(dict[str, str], await redis.hgetall(tags_key("taxi", orderid)))
        tags = {p: encode_tag(version, stored.get(p), issued) for p in TAG_DEFINED}
        return {"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}

    bodies = await asyncio.gather(*(known(orderid) for _, orderid in orders))
    return list(orders), list(bodies)

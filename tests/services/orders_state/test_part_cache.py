"""Stage 4's shared part cache (docs/protocol.md: Part endpoints): part data fetched from an
upstream is kept in Redis for every replica, by user, order, part, the content tag read
before the fetch and the request's parameters. Real orders_state processes on the test's
order_tags, emulator and Redis; the emulator counts its calls."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from shared.embedded_redis import EmbeddedRedis
from shared.protocol.tags import decode_tag
from tests.emulator_api import ORDER_CORE, calls, change, create_order_id
from tests.services.orders_state.process import orders_state_process

FAST = "/mlutp/v1/taxi/fast_info"
# the emulator's upstream of fast_info in the default policy
UPSTREAM = ORDER_CORE
HEADERS = {"Accept-Language": "ru-RU", "User-Agent": "yandex-taxi/5.1 iPhone"}


@contextlib.asynccontextmanager
async def replica(
    order_tags: TestServer, emulator: TestServer, redis_url: str
) -> AsyncIterator[str]:
    """One orders_state process whose shared part cache is on `redis_url`."""
    async with orders_state_process(order_tags, emulator, {"REDIS_URL": redis_url}) as (url, _):
        yield url


async def part(
    url: str, user: str, orderid: str, headers: dict[str, str] = HEADERS
) -> dict[str, Any]:
    """The order's fast_info as `user` asks it (no tag held: a new device, a restarted app)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url + FAST,
            json={"orders": [{"orderid": orderid}], "format_currency": True},
            headers={"X-Yandex-UID": user, **headers},
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()
        [answered] = json.loads(await resp.read())["orders"]
        result: dict[str, Any] = answered
        return result


def content(answered: dict[str, Any]) -> str | None:
    decoded = decode_tag(answered["tag"])
    assert decoded is not None
    return decoded.content


async def test_a_part_fetched_on_one_replica_costs_no_upstream_call_on_another_or_after_a_restart(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    redis_server: EmbeddedRedis,
    unique: str,
) -> None:
    orderid = await create_order_id(emulator, unique, status="driving")
    async with replica(order_tags_server, emulator_server, redis_server.url) as second:
        async with replica(order_tags_server, emulator_server, redis_server.url) as first:
            before = await calls(emulator, UPSTREAM)
            fetched = await part(first, unique, orderid)
            assert await calls(emulator, UPSTREAM) == before + 1
            elsewhere = await part(second, unique, orderid)
        assert await calls(emulator, UPSTREAM) == before + 1
        # the same data under the same content tag, issued at the fetch (the data's age)
        assert elsewhere == fetched and content(elsewhere) is not None
        # the first replica restarted: a process with nothing in memory
        async with replica(order_tags_server, emulator_server, redis_server.url) as restarted:
            assert await part(restarted, unique, orderid) == fetched
        assert await calls(emulator, UPSTREAM) == before + 1


async def test_another_user_naming_the_order_never_gets_its_owners_data(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    redis_server: EmbeddedRedis,
    unique: str,
) -> None:
    orderid = await create_order_id(emulator, unique, status="driving")
    other = f"{unique}-other"
    async with (
        replica(order_tags_server, emulator_server, redis_server.url) as first,
        replica(order_tags_server, emulator_server, redis_server.url) as second,
    ):
        owners = await part(first, unique, orderid)
        assert owners["status"] == "driving"
        for url in (first, second):
            before = await calls(emulator, UPSTREAM)
            # right after its owner, with the owner's very headers and body
            answered = await part(url, other, orderid)
            assert "status" not in answered and "driver" not in answered, url
            assert answered["error"]["update_status"] in {"expired", "stale"}
            # asked of the upstream, which checks the user, as without the cache
            assert await calls(emulator, UPSTREAM) > before, url


async def test_a_changed_content_tag_or_another_question_to_the_upstream_is_fetched(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    redis_server: EmbeddedRedis,
    unique: str,
) -> None:
    orderid = await create_order_id(emulator, unique, status="driving")
    async with (
        replica(order_tags_server, emulator_server, redis_server.url) as first,
        replica(order_tags_server, emulator_server, redis_server.url) as second,
    ):
        fetched = await part(first, unique, orderid)
        # another language reaches the upstream: another question, its own fetch
        before = await calls(emulator, UPSTREAM)
        await part(second, unique, orderid, {**HEADERS, "Accept-Language": "en-US"})
        assert await calls(emulator, UPSTREAM) == before + 1
        # the order changed (data, then its content tag): the kept data is not current
        changed = await change(emulator, "taxi", orderid, {"eta": {"minutes": 7}})
        before = await calls(emulator, UPSTREAM)
        fresh = await part(second, unique, orderid)
        assert await calls(emulator, UPSTREAM) == before + 1
        assert fresh["version"] == changed["version"] != fetched["version"]
        assert content(fresh) != content(fetched)
        # and the new data is what the other replica is answered now, with no call
        assert await part(first, unique, orderid) == fresh
        assert await calls(emulator, UPSTREAM) == before + 1


@pytest.mark.parametrize("outage", ["killed", "paused"])
async def test_with_the_part_caches_redis_gone_parts_are_still_answered(
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    own_redis: EmbeddedRedis,
    unique: str,
    outage: str,
) -> None:
    """The cache's Redis alone is gone (the tags' are up): its errors are misses, never a
    failed part request; the upstream (or the memo) answers."""
    orderid = await create_order_id(emulator, unique, status="driving")
    async with (
        replica(order_tags_server, emulator_server, own_redis.url) as first,
        replica(order_tags_server, emulator_server, own_redis.url) as second,
    ):
        fetched = await part(first, unique, orderid)
        if outage == "killed":
            own_redis.stop()
        else:
            own_redis.pause()
        try:
            before = await calls(emulator, UPSTREAM)
            started = time.monotonic()
            answered = await asyncio.gather(*(part(second, unique, orderid) for _ in range(3)))
            # within a Redis deadline or two, not the part's deadline
            assert time.monotonic() - started < 1.5
            assert all(one["status"] == fetched["status"] for one in answered)
            assert await calls(emulator, UPSTREAM) == before + 1
            # the replica that fetched answers from its memo
            assert (await part(first, unique, orderid))["status"] == fetched["status"]
        finally:
            if outage == "paused":
                own_redis.resume()

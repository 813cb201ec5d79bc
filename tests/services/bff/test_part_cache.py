"""The shared part cache's storage (services/bff/part_cache.py) on a real Redis: an order's
entries in one hash on its tags' hash tag, one per user, part and question, bounded per
order, expiring `ttl` after the last write; a failing Redis is a miss, never an error."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from services.bff.metrics import BffMetrics
from services.bff.part_cache import RedisPartCache, decode_kept, encode_kept, entry_field
from services.bff.ports import KeptPart, PartKey
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis, free_port
from shared.metrics import HttpMetrics
from shared.protocol.circuit import CircuitBreaker
from shared.redis import create_redis, parts_key, tags_key

FIELDS = b'{"status":"driving","eta":{"minutes":4}}'
TTL_MS = 60_000


def cache(client: redis.asyncio.Redis, **overrides: int) -> RedisPartCache:
    numbers = {"max_entries": 4, "max_entry_bytes": 1024, "zlib_level": 1, **overrides}
    return RedisPartCache(
        client,
        BffMetrics(HttpMetrics("test").registry),
        ttl_ms=TTL_MS,
        deadline_s=0.5,
        breaker=CircuitBreaker(2, 60.0),
        **numbers,
    )


@pytest.fixture
async def client(redis_server: EmbeddedRedis) -> AsyncIterator[redis.asyncio.Redis]:
    settings = RedisSettings(url=redis_server.url)
    made = create_redis(settings, decode_responses=False)
    assert isinstance(made, redis.asyncio.Redis)
    yield made
    await made.aclose()


def key(orderid: str, user: str = "u1", part: str = "fast_info", params: str = "p") -> PartKey:
    return PartKey("taxi", orderid, part, user, params)


def test_an_order_s_entries_share_the_hash_tag_of_its_content_tags():
    assert parts_key("taxi", "o1").split(":", 1)[1] == tags_key("taxi", "o1").split(":", 1)[1]


def test_a_field_names_its_user_part_and_question_unambiguously():
    # a user id holding the separator cannot pose as another user's entry
    one, other = key("o", user="a", part="b:c"), key("o", user="a:b", part="c")
    assert entry_field(one) != entry_field(other)


@pytest.mark.parametrize("level", [0, 1, 6])
def test_an_entry_reads_back_as_written_whatever_its_compression(level: int):
    kept = KeptPart("v17", 1_800_000_000_000, FIELDS * 20)
    assert decode_kept(encode_kept(kept, level)) == kept
    assert decode_kept(b"garbage") is None


async def test_a_kept_part_is_read_back_by_its_user_part_and_question_only(
    client: redis.asyncio.Redis, unique: str
):
    parts = cache(client)
    kept = KeptPart("v17", 1_000, FIELDS)
    await parts.put([(key(unique), kept)])
    assert await parts.get([key(unique)]) == [kept]
    others = [
        key(unique, user="u2"),
        key(unique, part="chat"),
        key(unique, params="q"),
        key(f"{unique}-2"),
    ]
    assert await parts.get(others) == [None] * 4
    # the order's hash expires one TTL after its last write
    assert 0 < await client.pttl(parts_key("taxi", unique)) <= TTL_MS


async def test_a_newer_fetch_replaces_an_older_one_never_the_reverse(
    client: redis.asyncio.Redis, unique: str
):
    parts = cache(client)
    newer = KeptPart("v18", 2_000, FIELDS)
    await parts.put([(key(unique), newer)])
    # a slow fetch under the older content tag ends after the newer one was kept
    await parts.put([(key(unique), KeptPart("v17", 1_000, FIELDS))])
    assert await parts.get([key(unique)]) == [newer]
    newest = KeptPart("v19", 3_000, FIELDS)
    await parts.put([(key(unique), newest)])
    assert await parts.get([key(unique)]) == [newest]


async def test_an_order_holds_at_most_max_entries_and_no_part_past_the_bytes_cap(
    client: redis.asyncio.Redis, unique: str
):
    parts = cache(client, max_entries=4, max_entry_bytes=len(FIELDS))
    kept = KeptPart("v1", 1_000, FIELDS)
    for params in "abcd":
        await parts.put([(key(unique, params=params), kept)])
    assert await client.hlen(parts_key("taxi", unique)) == 4  # type: ignore[misc]
    # a fifth question: the order's entries are dropped, the new one kept
    await parts.put([(key(unique, params="e"), kept)])
    assert await client.hlen(parts_key("taxi", unique)) == 1  # type: ignore[misc]
    assert await parts.get([key(unique, params="e")]) == [kept]
    await parts.put([(key(unique, params="f"), KeptPart("v1", 1_000, FIELDS + b" "))])
    assert await parts.get([key(unique, params="f")]) == [None]


async def test_a_redis_that_is_not_there_is_a_miss_and_opens_the_circuit():
    settings = RedisSettings(url=f"redis://127.0.0.1:{free_port()}/0")
    client = create_redis(settings, decode_responses=False)
    assert isinstance(client, redis.asyncio.Redis)
    parts = cache(client)
    try:
        kept = KeptPart("v1", 1_000, FIELDS)
        await parts.put([(key("o1"), kept)])
        assert await parts.get([key("o1"), key("o2")]) == [None, None]
        assert parts.breaker.is_open
    finally:
        await client.aclose()

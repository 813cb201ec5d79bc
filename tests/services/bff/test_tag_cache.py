"""The tag cache's circuit (services/bff/tag_cache.py) counts failed order_tags calls, not
failed polls: the polls whose reads were joined in one call fail together, and that is one
failure. Otherwise one lost call carrying five polls opened the circuit, and every poll
degraded for its 2 s (docs/protocol.md: What a lossy link to Redis costs)."""

from __future__ import annotations

import asyncio

from services.bff.tag_cache import TagCache
from services.bff.tag_reads import JoinedTagReads
from shared.protocol.circuit import CircuitBreaker
from shared.wire import OrderKey
from tests.services.fakes import FakeOrderTags, metrics, tag_cache


async def test_one_failed_call_joining_many_polls_is_one_failure_of_the_circuit() -> None:
    tags = FakeOrderTags()
    joined = JoinedTagReads(tags, max_in_flight=2, gather_s=0.0)  # type: ignore[arg-type]
    cache = TagCache(joined, CircuitBreaker(5, 2.0), metrics())
    failures_to_open = cache.circuit.failures_to_open
    tags.down = True
    polls = [cache.read([OrderKey("taxi", f"t{n}")], []) for n in range(failures_to_open * 2)]
    reads = await asyncio.gather(*polls)
    # every poll of the call degraded, in one call to order_tags
    assert reads == [None] * len(polls)
    assert tags.calls == ["get"]
    assert not cache.circuit.is_open
    # the circuit opens on failed calls in a row: that one and four more, one poll each
    for _ in range(failures_to_open - 2):
        assert await cache.read([OrderKey("taxi", "t0")], []) is None
    assert not cache.circuit.is_open
    assert await cache.read([OrderKey("taxi", "t0")], []) is None
    assert len(tags.calls) == failures_to_open
    assert cache.circuit.is_open


async def test_polls_of_separate_failed_calls_each_count() -> None:
    tags = FakeOrderTags()
    cache = tag_cache(tags)
    tags.down = True
    for _ in range(cache.circuit.failures_to_open):
        assert await cache.read([OrderKey("taxi", "t0")], []) is None
    assert cache.circuit.is_open


async def test_the_last_read_order_tags_answered_is_remembered_not_a_failed_one() -> None:
    """The watch cache holds re-polls only within a bound of the process's last answered tag
    read (docs/protocol.md: Waiting poll): a failed read must not count as one."""
    tags = FakeOrderTags()
    clock = [1_000.0]
    cache = tag_cache(tags)
    cache.wall_clock = lambda: clock[0]
    assert cache.read_at_ms is None
    assert await cache.read([OrderKey("taxi", "t0")], []) is not None
    assert cache.read_at_ms == 1_000_000
    clock[0] = 1_003.0
    tags.down = True
    assert await cache.read([OrderKey("taxi", "t0")], []) is None
    assert cache.read_at_ms == 1_000_000

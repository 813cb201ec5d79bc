"""The fetches remembered while the tag cache is down: kept one degraded TTL, bounded by
bytes, oldest out first."""

from __future__ import annotations

from services.bff.fetch_memo import FetchMemo, Remembered
from services.bff.ports import Fetched, FetchOutcome


def remembered(at_ms: int, size: int = 100) -> Remembered:
    return Remembered(Fetched(FetchOutcome.OK, b"x" * size), at_ms)


def test_a_fetch_is_remembered_for_one_degraded_ttl():
    memo = FetchMemo(ttl_ms=10_000, max_bytes=10**6)
    memo.put("order", remembered(1_000), 1_000)
    assert memo.get("order", 10_999) == remembered(1_000)
    assert memo.get("order", 11_000) is None
    assert len(memo) == 0


def test_memory_is_bounded_by_bytes_and_the_oldest_fetch_goes_first():
    # room for two entries of 100 bytes (each counted with its bookkeeping allowance)
    memo = FetchMemo(ttl_ms=10_000, max_bytes=2 * (100 + 256))
    for i in range(3):
        memo.put(f"order-{i}", remembered(1_000 + i), 1_000 + i)
    assert memo.get("order-0", 1_005) is None
    assert memo.get("order-1", 1_005) is not None
    assert memo.get("order-2", 1_005) is not None


def test_a_body_larger_than_the_whole_bound_is_not_kept():
    memo = FetchMemo(ttl_ms=10_000, max_bytes=1_000)
    memo.put("order", remembered(1_000, size=5_000), 1_000)
    assert len(memo) == 0

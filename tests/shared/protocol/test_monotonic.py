"""Monotonic reads (docs/protocol.md: Orders and their order): an order never goes backwards.
No answer gives an order as `actual` with a `version` lower than the one the client echoed;
a malformed echo is ignored, never a 400; a client echoing versions it never got has its
own service asked at most once per `min_ttl`."""

from __future__ import annotations

from typing import Any

import pytest

from shared.protocol.monotonic import (
    MAX_VERSION,
    echoed_version,
    goes_backwards,
    orders_behind,
    version_check_allowed,
)

MIN_TTL_MS = 2_000


def test_an_answer_older_than_the_echo_would_take_the_order_backwards():
    assert goes_backwards(served=6, echoed=7)


def test_an_answer_as_new_as_the_echo_or_newer_does_not():
    assert not goes_backwards(served=7, echoed=7)
    assert not goes_backwards(served=8, echoed=7)


def test_a_client_that_echoed_no_version_or_a_source_without_versions_orders_nothing():
    assert not goes_backwards(served=3, echoed=None)
    assert not goes_backwards(served=None, echoed=7)


def test_the_orders_an_answer_gives_older_than_their_echo_are_named():
    listed = [("a", 5), ("b", 9), ("c", None), ("d", 1)]
    assert orders_behind(listed, {"a": 6, "b": 9, "c": 4}) == {"a"}


@pytest.mark.parametrize("value", [0, 1, 17, MAX_VERSION])
def test_a_non_negative_integer_is_a_version(value: int):
    assert echoed_version(value) == value


@pytest.mark.parametrize(
    "value",
    [None, -1, MAX_VERSION + 1, 2**64, 1.0, 7.5, "7", True, False, [7], {"v": 7}],
)
def test_anything_else_echoed_is_ignored_like_a_malformed_created_at(value: Any):
    assert echoed_version(value) is None


def test_a_source_is_asked_for_a_newer_answer_at_most_once_per_min_ttl():
    assert version_check_allowed(None, now_ms=10_000, min_ttl_ms=MIN_TTL_MS)
    assert not version_check_allowed(10_000, now_ms=10_000, min_ttl_ms=MIN_TTL_MS)
    assert not version_check_allowed(10_000, now_ms=11_999, min_ttl_ms=MIN_TTL_MS)
    assert version_check_allowed(10_000, now_ms=12_000, min_ttl_ms=MIN_TTL_MS)


def test_a_clock_that_went_back_does_not_hold_the_check_for_ever():
    assert version_check_allowed(50_000, now_ms=10_000, min_ttl_ms=MIN_TTL_MS)

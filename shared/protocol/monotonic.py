"""Monotonic reads (docs/protocol.md: Orders and their order): an order never goes backwards.
Every actual order carries its source's `version` (an integer that grows with every change
of the order) and the client echoes it; no answer gives an order as `actual` with a version
lower than the one the client echoed. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

# the largest version taken from a client: every integer a JSON number holds exactly in every
# client (JavaScript's Number.MAX_SAFE_INTEGER); a larger echo is no version this server gave
MAX_VERSION = 2**53 - 1


def echoed_version(value: object) -> int | None:
    """The version a client echoed, if it is one: a non-negative integer of at most
    MAX_VERSION. Anything else (a string, a fraction, a boolean, a negative or huge number) is
    ignored, like a malformed `created_at`: the echo is the client's own field, never a 400."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if not 0 <= value <= MAX_VERSION:
        return None
    return value


def goes_backwards(served: int | None, echoed: int | None) -> bool:
    """Whether answering the order `actual` at the version `served` would take it back from
    the version the client echoed (it got that one from this server: what the user sees is
    newer). A source that names no version, or a client that echoed none, orders nothing."""
    if served is None or echoed is None:
        return False
    return served < echoed


def orders_behind(listed: Iterable[tuple[K, int | None]], echoed: Mapping[K, int]) -> set[K]:
    """The orders of an answer (key, version served) that it gives older than their echo: not
    to be answered `actual` from it."""
    return {key for key, served in listed if goes_backwards(served, echoed.get(key))}


def version_check_allowed(last_asked_ms: int | None, *, now_ms: int, min_ttl_ms: int) -> bool:
    """Whether a kept answer older than an echo may send the poll to the source now: once per
    `min_ttl` per (user, service) at most, as `force` is bounded. A client that echoes
    versions it never got makes only its own orders stale and its own source asked no more
    often than that; within the TTL its orders are answered `stale` with its echo."""
    if last_asked_ms is None:
        return True
    return not 0 <= now_ms - last_asked_ms < min_ttl_ms

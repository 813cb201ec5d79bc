"""The per-order bound while the tag cache is down: one upstream call per order (per user and
request) per degraded TTL in this process, however the client fetches its parts.

With the cache up, a part is refetched only when its content changed, and parts requested
together share one call. With it down nothing tells a change apart, and a client fetching its
parts one after another would cost one call each. So each fetch made while the cache is down
is remembered for one degraded TTL, and a part request of the same order in that time is
answered from it, with a tag issued at the original fetch (its age is the data's age).
Memory is bounded by bytes; the oldest entries go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from services.bff.part_upstream import Fetched


@dataclass(frozen=True)
class Remembered:
    fetched: Fetched
    issued_ms: int


class DegradedMemo:
    def __init__(self, ttl_ms: int, max_bytes: int) -> None:
        self.ttl_ms = ttl_ms
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, Remembered] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _size(entry: Remembered) -> int:
        # the body, plus a rough allowance for the key and the bookkeeping
        return len(entry.fetched.body or b"") + 256

    def get(self, key: Hashable, now_ms: int) -> Remembered | None:
        """The fetch made for `key` less than a degraded TTL ago, if any."""
        self._expire(now_ms)
        return self._entries.get(key)

    def put(self, key: Hashable, entry: Remembered, now_ms: int) -> None:
        size = self._size(entry)
        if size > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= self._size(old)
        self._entries[key] = entry
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= self._size(evicted)
        self._expire(now_ms)

    def _expire(self, now_ms: int) -> None:
        # entries are kept in the order of their fetch: the oldest are first
        while self._entries:
            key, oldest = next(iter(self._entries.items()))
            if now_ms - oldest.issued_ms < self.ttl_ms:
                return
            del self._entries[key]
            self._bytes -= self._size(oldest)

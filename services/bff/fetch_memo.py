"""Per-order bounds on upstream calls, kept per process: fetches remembered for a while, and a
part request of the same order (same upstream, user and request) in that time answered from
one of them instead of a new call, with a tag issued at the original fetch (its age is the
data's age). Memory is bounded by bytes; the oldest entries go first.

- While the tag cache is down: one call per order per degraded TTL, however the client
  fetches its parts. With it up, parts requested together share one call; with it down
  nothing tells a change apart, and parts fetched one after another would cost one each.
- With it up: one call per order per min TTL while its content tags stay the same. A part
  request is meant to follow a change, but nothing stops a client from sending one as fast
  as it can; its content tags unchanged since the remembered fetch (read before it) mean
  that fetch's data is still as new as they say.

A failed fetch is remembered as a successful one is: a failing upstream gets no more calls than
a healthy one (the parts of one document asked one after another share its failed call).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from services.bff.ports import Fetched


@dataclass(frozen=True)
class Remembered:
    fetched: Fetched
    issued_ms: int
    # the order's content tags read before the fetch (None: the cache was down)
    stored: dict[str, str] | None = None


class FetchMemo:
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
        """The fetch made for `key` less than the TTL ago, if any."""
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

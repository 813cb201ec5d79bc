"""Stage 4's shared part cache in Redis (docs/protocol.md: Part endpoints): part data fetched
from an upstream, kept for every replica, so that a second device, a retry on another
replica, a restart or a deploy costs no upstream call.

An order's entries are one hash, `parts:{<service>:<orderid>}` (the hash tag of its content
tags: one slot, on a cluster too). A field is one user's part for one question to the
upstream, `[user, part, params digest]`; its value names the content tag read before the
fetch, when, and the part's fields, compressed. A newer fetch of the same field replaces the
older (an older content tag is never current again), so the hash holds one entry per user,
part and question; at most `max_entries` of them: a write past that empties the hash first
(a client varying its headers cannot grow an order without bound; the others' entries cost
an upstream call each, once). The hash expires `ttl` after its last write, and an entry
older than `ttl` is not served (shared.protocol.parts.kept_part_serves).

Every failure is a miss: a Redis error, a deadline passed, or the circuit open after
failures in a row; the part is then fetched (or answered by the memo) as without the cache.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import msgspec
from redis.exceptions import RedisError

from services.bff.metrics import BffMetrics
from services.bff.ports import KeptPart, PartKey
from shared.logs import Sparse
from shared.protocol.circuit import CircuitBreaker
from shared.redis import RedisClient, parts_key

log = logging.getLogger("mlutp.part_cache")

T = TypeVar("T")

# the redis connections' name in CLIENT LIST
PART_CACHE_CLIENT_NAME = "mlutp-part-cache"
# the value: 13 digits of issue time (ms), the codec, the content tag, a newline, the data
_ISSUED_DIGITS = 13
ZLIB = b"z"
PLAIN = b"n"

# KEYS[1]: the order's hash; ARGV: field, value, ttl (ms), most entries. An older fetch
# (by issue time) never replaces a newer one: a slow fetch under an older content tag ends
# after a newer one was kept. A new field past the most entries empties the hash first.
PUT_SCRIPT = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  if tonumber(string.sub(old, 1, 13)) > tonumber(string.sub(ARGV[2], 1, 13)) then
    return 0
  end
elseif redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


def entry_field(key: PartKey) -> bytes:
    """The order's hash field of one user's part for one question: a JSON array, so no user
    id, part name or digest can be made to read as another's."""
    return msgspec.json.encode([key.user_id, key.part, key.params])


def encode_kept(kept: KeptPart, zlib_level: int) -> bytes:
    """The entry's value; `zlib_level` 0 keeps the fields as they are."""
    if zlib_level > 0:
        codec, data = ZLIB, zlib.compress(kept.fields, zlib_level)
    else:
        codec, data = PLAIN, kept.fields
    header = f"{kept.issued_ms:0{_ISSUED_DIGITS}d}".encode() + codec + kept.content.encode()
    return header + b"\n" + data


def decode_kept(value: bytes) -> KeptPart | None:
    """The entry, or None for a value this version cannot read (then it is fetched anew)."""
    head, newline, data = value.partition(b"\n")
    if not newline or len(head) <= _ISSUED_DIGITS:
        return None
    issued = head[:_ISSUED_DIGITS]
    codec, content = head[_ISSUED_DIGITS : _ISSUED_DIGITS + 1], head[_ISSUED_DIGITS + 1 :]
    if not issued.isdigit() or not content:
        return None
    if codec == ZLIB:
        try:
            data = zlib.decompress(data)
        except zlib.error:
            return None
    elif codec != PLAIN:
        return None
    return KeptPart(content.decode(), int(issued), data)


class RedisPartCache:
    """`services.bff.ports.SharedParts` on Redis (the tags' Redis or Cluster)."""

    def __init__(
        self,
        redis: RedisClient,
        metrics: BffMetrics,
        *,
        ttl_ms: int,
        max_entries: int,
        max_entry_bytes: int,
        zlib_level: int,
        deadline_s: float,
        breaker: CircuitBreaker,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: what the circuit's open time is measured on (a virtual loop's time in the
        simulation, devtools/simulation/bff.py)."""
        self.redis = redis
        self.metrics = metrics
        self.ttl_ms = ttl_ms
        self.max_entries = max_entries
        self.max_entry_bytes = max_entry_bytes
        self.zlib_level = zlib_level
        self.deadline_s = deadline_s
        self.breaker = breaker
        self.clock = clock
        self._put = redis.register_script(PUT_SCRIPT)
        self._warnings = Sparse()

    async def _call(self, what: str, operation: Callable[[], Awaitable[T]]) -> T | None:
        """`operation` within the deadline, through the circuit; None when it failed."""
        if not self.breaker.allow(self.clock()):
            return None
        try:
            async with asyncio.timeout(self.deadline_s):
                result = await operation()
        except (RedisError, OSError, TimeoutError) as exc:
            self.breaker.failure(self.clock())
            self.metrics.part_cache_errors.labels(what).inc()
            self._warnings.warning(log, "part cache failed", what, error=repr(exc))
            return None
        except asyncio.CancelledError:
            self.breaker.abandon()
            raise
        self.breaker.success()
        return result

    async def get(self, keys: Sequence[PartKey]) -> list[KeptPart | None]:
        if not keys:
            return []

        async def read() -> list[bytes | str | None]:
            # one order, one slot: each order its own command (a cluster's orders are on
            # different shards), sent together
            return await asyncio.gather(
                *(
                    self.redis.hget(parts_key(key.service, key.orderid), entry_field(key))
                    for key in keys
                )
            )

        values = await self._call("get", read)
        if values is None:
            return [None] * len(keys)
        # the client answers bytes (decode_responses off)
        return [decode_kept(value) if isinstance(value, bytes) else None for value in values]

    async def put(self, entries: Sequence[tuple[PartKey, KeptPart]]) -> None:
        writes = [
            (key, encode_kept(kept, self.zlib_level))
            for key, kept in entries
            if len(kept.fields) <= self.max_entry_bytes
        ]
        if not writes:
            return

        async def write() -> None:
            await asyncio.gather(
                *(
                    self._put(
                        keys=[parts_key(key.service, key.orderid)],
                        args=[entry_field(key), value, self.ttl_ms, self.max_entries],
                    )
                    for key, value in writes
                )
            )

        await self._call("put", write)

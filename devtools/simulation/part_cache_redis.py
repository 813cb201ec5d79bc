"""The simulated store's Redis as the shared part cache's client uses it
(services/bff/part_cache.py): the part hashes every replica's RedisPartCache shares, lost,
failing and flushed with the tags (devtools/simulation/store.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from redis.exceptions import ConnectionError as RedisConnectionError

if TYPE_CHECKING:
    from devtools.simulation.store import SimTagStore

# a part cache command sent to a paused Redis has no answer before the client's own deadline
# (services/bff/part_cache.py: deadline_s) cuts it
PAUSED_ANSWER_S = 60.0


@dataclass
class PartHash:
    """An order's part cache hash: field → value, expiring `ttl` after its last write."""

    fields: dict[bytes, bytes] = field(default_factory=dict)
    expires_ms: int = 0


class StoreRedis:
    """The store's Redis as the shared part cache's client uses it (services/bff/part_cache.py):
    HGET, and PUT_SCRIPT kept as the script keeps it (an older fetch never replaces a newer
    one, a new field past the most entries empties the hash, the hash expires its TTL after
    its last write). Each command is a round trip: a millisecond or two, a lost connection
    while the store is down, and no answer while it is paused (the client's deadline ends it)."""

    def __init__(self, store: SimTagStore) -> None:
        self.store = store

    async def _call(self) -> None:
        store = self.store
        if not store.paused:
            await asyncio.sleep(0.0005 + store.rng.random() * 0.0015)
        if store.paused:
            await asyncio.sleep(PAUSED_ANSWER_S)
        if store.down or store.paused:
            raise RedisConnectionError("simulated Redis: down")

    def _hash(self, key: str) -> PartHash | None:
        stored = self.store._parts.get(key)
        if stored is not None and stored.expires_ms <= self.store.now_ms():
            del self.store._parts[key]
            return None
        return stored

    async def hget(self, name: str, key: bytes) -> bytes | None:
        await self._call()
        stored = self._hash(name)
        return stored.fields.get(key) if stored is not None else None

    def register_script(self, script: str) -> Callable[..., Awaitable[int]]:
        async def put(keys: Sequence[str], args: Sequence[bytes | int]) -> int:
            await self._call()
            name = keys[0]
            field_name, value, ttl_ms, most = args
            assert isinstance(field_name, bytes) and isinstance(value, bytes)
            stored = self._hash(name)
            if stored is None:
                stored = self.store._parts[name] = PartHash()
            old = stored.fields.get(field_name)
            if old is not None:
                if int(old[:13]) > int(value[:13]):
                    return 0
            elif len(stored.fields) >= int(most):
                stored.fields.clear()
            stored.fields[field_name] = value
            stored.expires_ms = self.store.now_ms() + int(ttl_ms)
            return 1

        return put

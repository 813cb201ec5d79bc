"""The faults a phase of the new scheme can run under, each an object that starts and ends
itself on the stack: `redis` (killed, then started again empty), `redis_stop` (SIGSTOP, then
SIGCONT), `redis_pause` (CLIENT PAUSE, which ends by itself), `totw` (answering 500),
`source:eats` (down)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import aiohttp
import redis.asyncio as aioredis

from devtools.stack import Stack
from shared.embedded_redis import EmbeddedRedis


@dataclass(frozen=True)
class FaultTarget:
    """What a fault acts on: the stack, and a session to reach its emulator."""

    stack: Stack
    session: aiohttp.ClientSession

    @property
    def redis(self) -> EmbeddedRedis:
        server = self.stack.redis
        if server is None:
            raise RuntimeError("this fault needs the stack's own Redis")
        return server

    async def emulator_fault(self, target: str, mode: str) -> None:
        async with self.session.post(
            f"{self.stack.url('emulator')}/emulator/v1/faults",
            json={"target": target, "mode": mode},
        ) as response:
            response.raise_for_status()


class Fault(Protocol):
    @property
    def needs_own_redis(self) -> bool:
        """It acts on the one Redis of the stack (so not with a Redis Cluster)."""
        ...

    async def start(self, on: FaultTarget, seconds: float) -> None: ...

    async def end(self, on: FaultTarget) -> None: ...


class RedisKilled:
    needs_own_redis = True

    async def start(self, on: FaultTarget, seconds: float) -> None:
        await asyncio.to_thread(on.redis.stop)

    async def end(self, on: FaultTarget) -> None:
        await asyncio.to_thread(on.redis.start)


class RedisStopped:
    """SIGSTOP: the port stays open and nothing answers, like a blackholed host."""

    needs_own_redis = True

    async def start(self, on: FaultTarget, seconds: float) -> None:
        on.redis.pause()

    async def end(self, on: FaultTarget) -> None:
        on.redis.resume()


class RedisClientPause:
    needs_own_redis = True

    async def start(self, on: FaultTarget, seconds: float) -> None:
        client = aioredis.Redis.from_url(on.redis.url)
        try:
            await client.client_pause(int(seconds * 1000))
        finally:
            await client.aclose()

    async def end(self, on: FaultTarget) -> None:
        pass  # CLIENT PAUSE ends by itself


@dataclass(frozen=True)
class EmulatorFault:
    """One of the emulator's upstreams failing in a mode of its own."""

    target: str
    mode: str
    needs_own_redis: bool = False

    async def start(self, on: FaultTarget, seconds: float) -> None:
        await on.emulator_fault(self.target, self.mode)

    async def end(self, on: FaultTarget) -> None:
        await on.emulator_fault(self.target, "ok")


FAULT_KINDS: dict[str, Fault] = {
    "redis": RedisKilled(),
    "redis_stop": RedisStopped(),
    "redis_pause": RedisClientPause(),
    # the order core, fast_info's own upstream (a totw fault would fail legacy alone: no part
    # is fetched from it)
    "order_core": EmulatorFault("part:order_core", "error500"),
    "source:eats": EmulatorFault("source:eats", "down"),
}
FAULTS = tuple(FAULT_KINDS)

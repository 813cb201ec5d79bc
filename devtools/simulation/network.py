"""The network between the simulated apps and the BFF processes: requests go to the replicas
in turn, passing over one that refuses.

Each request takes a few milliseconds on the network, drawn from the client's own random
stream, so what happens next depends on the seed, not on the order the loop happened to wake
things in."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from devtools.simulation.bff import BffProcess, PollReply, Refused
from devtools.simulation.wakeups import CURRENT_USER


class Replicas(Protocol):
    def pick(self, turn: int) -> list[BffProcess]:
        """The replicas to try for a request, in the order a balancer would."""
        ...


class Network:
    """How a client reaches the replicas: in turn, passing over one that refuses (as
    client/transport.py's Replicas does), each way a few milliseconds."""

    def __init__(self, replicas: Callable[[], Sequence[BffProcess]], rng: random.Random) -> None:
        self.replicas = replicas
        self.rng = rng
        self._turn = 0

    async def orders_state(self, user_id: str, body: dict[str, Any]) -> PollReply | None:
        reply: PollReply | None = await self.call(
            user_id, lambda process: process.orders_state(user_id, body)
        )
        return reply

    async def launch(self, user_id: str, body: dict[str, Any]) -> PollReply | None:
        reply: PollReply | None = await self.call(
            user_id, lambda process: process.launch(user_id, body)
        )
        return reply

    async def part(
        self, user_id: str, url: str, orders: Sequence[tuple[str, str | None]]
    ) -> list[dict[str, Any]] | None:
        parts: list[dict[str, Any]] | None = await self.call(
            user_id, lambda process: process.part(user_id, url, orders)
        )
        return parts

    async def call(self, user_id: str, request: Callable[[BffProcess], Any]) -> Any:
        """The reply, or None when no replica takes the request. The network's time is
        taken on the way there (one timer a request: the way back adds nothing the order of
        events depends on)."""
        replicas = list(self.replicas())
        self._turn += 1
        await asyncio.sleep(0.004 + self.rng.random() * 0.04)
        for step in range(len(replicas)):
            process = replicas[(self._turn + step) % len(replicas)]
            CURRENT_USER.set(user_id)
            with contextlib.suppress(Refused):
                return await request(process)
        return None

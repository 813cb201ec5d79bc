"""The network between the simulated apps and the BFF processes: a balancer in front of the
replicas, routing by user (as the shipped haproxy: `balance hdr(X-Yandex-UID)` with
`hash-type consistent`) or spraying (each request to the next replica), passing over one
that refuses either way.

Each request takes a few milliseconds on the network, drawn from the client's own random
stream, so what happens next depends on the seed, not on the order the loop happened to wake
things in."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from devtools.simulation.bff import BffProcess, PollReply, Refused
from devtools.simulation.wakeups import CURRENT_USER

# points of each replica on the ring: enough that three replicas share the users about evenly
RING_POINTS = 64


class Router(Protocol):
    def order(self, user_id: str, replicas: Sequence[BffProcess]) -> list[BffProcess]:
        """The live replicas to try for a request of `user_id`, in the balancer's order."""
        ...


def _point(text: str) -> int:
    # a hash of its own, not hash(): the same ring in every process and PYTHONHASHSEED
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class UserRouter:
    """Consistent hashing of the user id over the replicas' names: each user's requests go to
    one replica (its polls and part requests meet there: coalescing and the per-process memos
    work as on one process); the replicas after it on the ring take over while it is down or
    refuses, so a replica down moves only its own users, and they come back when it does."""

    def __init__(self, names: Sequence[str]) -> None:
        ring = sorted((_point(f"{name}#{i}"), name) for name in names for i in range(RING_POINTS))
        self._points = [point for point, _ in ring]
        self._names = [name for _, name in ring]
        self._preference: dict[str, list[str]] = {}

    def preference(self, user_id: str) -> list[str]:
        """Every replica's name, in the order the ring offers them to `user_id`."""
        known = self._preference.get(user_id)
        if known is None:
            start = bisect.bisect(self._points, _point(user_id))
            known = []
            for step in range(len(self._names)):
                name = self._names[(start + step) % len(self._names)]
                if name not in known:
                    known.append(name)
            self._preference[user_id] = known
        return known

    def order(self, user_id: str, replicas: Sequence[BffProcess]) -> list[BffProcess]:
        live = {process.name: process for process in replicas}
        return [live[name] for name in self.preference(user_id) if name in live]


class SprayingRouter:
    """Each request to the next replica in turn (round robin, as client/transport.py's
    Replicas does): one user's polls and part requests spread over the fleet, each process's
    memos and coalescing seeing a share of them (Options.spraying_router)."""

    def __init__(self) -> None:
        self._turn = 0

    def order(self, user_id: str, replicas: Sequence[BffProcess]) -> list[BffProcess]:
        self._turn += 1
        first = self._turn % len(replicas) if replicas else 0
        return [*replicas[first:], *replicas[:first]]


class Network:
    """How one app reaches the replicas: through the balancer's router, passing over one that
    refuses, each way a few milliseconds."""

    def __init__(
        self,
        replicas: Callable[[], Sequence[BffProcess]],
        router: Router,
        rng: random.Random,
    ) -> None:
        self.replicas = replicas
        self.router = router
        self.rng = rng

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
        replicas = self.router.order(user_id, list(self.replicas()))
        await asyncio.sleep(0.004 + self.rng.random() * 0.04)
        for process in replicas:
            CURRENT_USER.set(user_id)
            with contextlib.suppress(Refused):
                return await request(process)
        return None

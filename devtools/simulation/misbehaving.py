"""`MisbehavingClient` does what the protocol asks apps not to: names other users' orders, forces
on every poll, polls faster than told, asks for parts of orders that are not its user's."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from devtools.simulation.clients import SUPPORTED
from devtools.simulation.network import Network
from devtools.simulation.world import World
from shared.policy import PollingPolicy
from shared.wire import OrderKey


class MisbehavingClient:
    """Names other users' orders with force on every poll, one of them (its victim) every
    time, whatever their state; polls every few seconds whatever the interval (often enough
    to spend an order's force budget many times over); asks for their parts."""

    def __init__(
        self,
        name: str,
        user_id: str,
        world: World,
        policy: PollingPolicy,
        network: Network,
        rng: random.Random,
    ) -> None:
        self.name = name
        self.user_id = user_id
        self.world = world
        self.network = network
        self.rng = rng
        self.fast_info = policy.services["taxi"].rules_by_priority[0].url
        self.victim: OrderKey | None = None

    async def run(self, start_t: float, end_t: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, start_t - loop.time()))
        # bounded by the run's end: a pause of at least three seconds each turn
        while loop.time() < end_t:
            others = [
                order
                for order in self.world.orders.values()
                if order.user_id != self.user_id and order.finished_t is None
            ]
            victim = self.world.orders.get(self.victim) if self.victim is not None else None
            if (victim is None or victim.finished_t is not None) and others:
                self.victim = self.rng.choice(others).key
            if self.victim is not None:
                named = [self.victim]
                named += [o.key for o in self.rng.sample(others, min(len(others), 2))]
                body: dict[str, Any] = {
                    "known_orders": [
                        {
                            "orderid": key.orderid,
                            "service": key.service,
                            "status": "driving",
                            "force": True,
                            "created_at": self.world.orders[key].created_at,
                        }
                        for key in dict.fromkeys(named)
                    ],
                    "supported_services": SUPPORTED,
                }
                await self.network.orders_state(self.user_id, body)
                if self.victim.service == "taxi" and self.rng.random() < 0.3:
                    asked = [(self.victim.orderid, None)]
                    await self.network.part(self.user_id, self.fast_info, asked)
            await asyncio.sleep(self.rng.uniform(3.0, 6.0))

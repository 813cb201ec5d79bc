"""The background driver: moves orders through their lifecycles and changes feature data at
the profile's rates, so a running stack looks alive. Off by default in tests."""

from __future__ import annotations

import asyncio
import logging
import random
import time

from emulator.config import DriverProfile
from emulator.documents import LIFECYCLES, SERVICES
from emulator.features import Features
from emulator.world import InvalidChange, Order, UnknownOrder, iso_now

log = logging.getLogger("mlutp.emulator.driver")


class Driver:
    def __init__(self, features: Features, profile: DriverProfile) -> None:
        self.features = features
        self.profile = profile
        self.enabled = profile.enabled
        self.rng = random.Random()
        self._status_since: dict[str, float] = {}
        self._filled = False

    def _chance(self, mean_interval_s: float) -> bool:
        """True with the probability that an event of this mean interval falls in one tick."""
        if mean_interval_s <= 0:
            return False
        scaled_tick = self.profile.tick_s * self.profile.time_scale
        return self.rng.random() < min(1.0, scaled_tick / mean_interval_s)

    def _status_table(self, service: str) -> dict[str, float]:
        if service == "taxi":
            return self.profile.taxi_status_minutes
        return self.profile.place_status_minutes

    def _status_minutes(self, order: Order) -> float:
        return self._status_table(order.service).get(order.status, 5.0)

    def _lifetime_s(self, order: Order) -> float:
        return sum(self._status_table(order.service).values()) * 60

    async def step(self) -> None:
        features = self.features
        world = features.world
        now = time.monotonic()
        for order in world.all_active():
            try:
                since = self._status_since.setdefault(order.orderid, now)
                in_status = (now - since) * self.profile.time_scale
                if order.awaiting_rating:
                    if in_status >= self.profile.rate_after_s:
                        rating = self.rng.randint(1, 5)
                        await features.rate(order.service, order.orderid, order.user_id, rating)
                    continue
                if in_status >= self._status_minutes(order) * 60:
                    await features.advance(order.service, order.orderid)
                    self._status_since[order.orderid] = now
                    continue
                if order.service == "taxi" and order.status == "transporting":
                    progress = order.doc.get("ride_progress", {}).get("percent", 0)
                    if self._chance(self.profile.fast_change_every_s):
                        await features.change(
                            "taxi",
                            order.orderid,
                            {
                                "eta": {"minutes": self.rng.randint(1, 30)},
                                "ride_progress": {"percent": min(99, progress + 10)},
                            },
                        )
                elif self._chance(self.profile.fast_change_every_s):
                    await features.change(
                        order.service, order.orderid, {"eta": {"minutes": self.rng.randint(1, 30)}}
                    )
                lifetime = self._lifetime_s(order)
                if order.service == "taxi" and self._chance(
                    lifetime / max(self.profile.rarely_changed_per_order, 1e-9)
                ):
                    await features.change(
                        "taxi", order.orderid, {"comment": f"comment {self.rng.randint(1, 999)}"}
                    )
                if order.service == "taxi" and self._chance(
                    lifetime / max(self.profile.chat_messages_per_order, 1e-9)
                ):
                    history = list(order.doc.get("chathistory", []))
                    history.append({"from": "driver", "text": "I am here", "at": iso_now()})
                    await features.change(
                        "taxi",
                        order.orderid,
                        {
                            "chathistory": history,
                            "orderchat": {"enabled": True, "unread": len(history)},
                        },
                    )
                if (
                    order.service == "taxi"
                    and order.status in ("driving", "transporting")
                    and self._chance(self.profile.driver_move_every_s)
                ):
                    position = order.driver_position or order.doc["source"]["point"]
                    world.move_driver(
                        order,
                        [
                            position[0] + self.rng.uniform(-1e-3, 1e-3),
                            position[1] + self.rng.uniform(-1e-3, 1e-3),
                        ],
                    )
            except (InvalidChange, UnknownOrder):
                continue
        await self._keep_population()

    def _random_point_of_life(self, service: str) -> tuple[str, float]:
        """A status, and how long the order has been in it, drawn so that a population
        started at once looks like one that has been running: statuses in proportion to
        their durations, and a random time into each."""
        table = self._status_table(service)
        statuses = [s for s in LIFECYCLES[service][:-1] if s in table]
        status = self.rng.choices(statuses, weights=[table[s] for s in statuses])[0]
        return status, self.rng.uniform(0, table[status] * 60)

    async def _keep_population(self) -> None:
        world = self.features.world
        first_fill = not self._filled
        self._filled = True
        for index in range(self.profile.population):
            user_id = f"demo-user-{index + 1}"
            if any(world.active(user_id, service) for service in SERVICES):
                continue
            service = SERVICES[index % len(SERVICES)] if self.rng.random() < 0.5 else "taxi"
            if not first_fill:
                await self.features.create_order(user_id, service)  # a new order: from the start
                continue
            status, into_status_s = self._random_point_of_life(service)
            order = await self.features.create_order(user_id, service, status)
            self._status_since[order.orderid] = (
                time.monotonic() - into_status_s / self.profile.time_scale
            )

    async def run(self) -> None:
        """Ticks until cancelled; a failed tick is logged, never fatal."""
        while True:
            if self.enabled:
                try:
                    await self.step()
                except Exception:
                    log.exception("driver tick failed")
            await asyncio.sleep(self.profile.tick_s)

"""Feature services: they change order data, then set the content tags of exactly the parts
holding the changed fields (data first, tag second), through the shared OrderTagsClient."""

from __future__ import annotations

import logging
from typing import Any

from emulator.stats import Stats
from emulator.world import DataChange, Order, World
from shared.errors import OrderTagsUnavailable
from shared.order_tags_client import OrderTagsClient
from shared.policy import PollingPolicy

log = logging.getLogger("mlutp.emulator.features")


class Features:
    def __init__(
        self, world: World, tags: OrderTagsClient, policy: PollingPolicy, stats: Stats
    ) -> None:
        self.world = world
        self.tags = tags
        self.policy = policy
        self.stats = stats

    def parts_of(self, service: str, fields: frozenset[str]) -> list[str]:
        """The tag_defined, non-static parts that carry any of these fields."""
        service_policy = self.policy.services.get(service)
        if service_policy is None:
            return []
        return sorted(
            rule.part_name
            for rule in service_policy.rules
            if rule.tag_defined and not rule.static and fields.intersection(rule.fields)
        )

    async def publish(self, change: DataChange) -> dict[str, str]:
        """Set the changed parts' content tags. Taxi tags carry the order_proc version; the
        other services have no versions of their own, so their tags are bumped."""
        parts = self.parts_of(change.service, change.fields)
        if not parts:
            return {}
        try:
            if change.service == "taxi":
                content = {part: f"v{change.version}" for part in parts}
                await self.tags.set(change.service, change.orderid, content)
                return content
            return await self.tags.bump(change.service, change.orderid, parts)
        except OrderTagsUnavailable as exc:
            # the data has changed anyway; a client sees it once its tag expires
            self.stats.tag_write_failures += 1
            log.warning("tag write failed", extra={"orderid": change.orderid, "error": str(exc)})
            return {}

    async def create_order(self, user_id: str, service: str, status: str | None = None) -> Order:
        order, change = self.world.create(user_id, service, status)
        await self.publish(change)
        self.world.commit(change)  # the creating call returns: the app has the order now
        return order

    async def advance(self, service: str, orderid: str) -> DataChange:
        change = self.world.advance(service, orderid)
        await self.publish(change)
        return change

    async def change(self, service: str, orderid: str, fields: dict[str, Any]) -> DataChange:
        change = self.world.change(service, orderid, fields)
        await self.publish(change)
        return change

    async def user_change(
        self, service: str, orderid: str, user_id: str, name: str, value: Any, **how: Any
    ) -> int:
        """A user's change (docs/protocol.md: Feature data and user changes): data first, tags
        second. Returns the data version the client waits to see."""
        change, version = self.world.user_change(service, orderid, user_id, name, value, **how)
        if change is not None:
            await self.publish(change)
        return version

    async def cancel(self, service: str, orderid: str, user_id: str) -> int:
        """The user cancels an order; it leaves the active orders."""
        change = self.world.cancel(service, orderid, user_id)
        await self.publish(change)
        return change.version

    async def rate(self, service: str, orderid: str, user_id: str, rating: int) -> int:
        """The user rates a finished order; it then leaves the active orders."""
        change = self.world.rate(service, orderid, user_id, rating)
        await self.publish(change)
        return change.version

"""Feature services: they change order data, then set the content tags of exactly the parts
holding the changed fields (data first, tag second), through the shared OrderTagsClient."""

from __future__ import annotations

import logging
from typing import Any

from emulator.source_lists import SourceLists, listing
from emulator.stats import Stats
from emulator.world import DataChange, Order, World
from shared.errors import OrderTagsUnavailable
from shared.order_tags_client import OrderTagsClient
from shared.policy import PollingPolicy
from shared.protocol.tags import new_content_tag

log = logging.getLogger("mlutp.emulator.features")

# the top-level fields an order source's listing shows of an order: its status (and with it
# the change capabilities), and what its brief fields are made of (emulator.documents)
LISTED_FIELDS = {
    "taxi": frozenset({"status", "source", "tariff"}),
    "eats": frozenset({"status", "place", "items"}),
    "grocery": frozenset({"status", "place", "items"}),
}


class Features:
    def __init__(
        self, world: World, tags: OrderTagsClient, policy: PollingPolicy, stats: Stats
    ) -> None:
        self.world = world
        self.tags = tags
        self.policy = policy
        self.stats = stats
        # each user's list, version by version, for a lagging source's replica
        self.lists = SourceLists()

    def parts_of(self, service: str, fields: frozenset[str]) -> list[str]:
        """The tagged parts of every policy version the file serves that carry any of these
        fields: a client of any version, on a replica of either file of a rollout, sees the
        change."""
        service_policy = self.policy.services.get(service)
        if service_policy is None:
            return []
        return service_policy.parts_holding(fields)

    async def publish_list(self, change: DataChange, *, left: bool = False) -> None:
        """After a change of what the order's source lists for its user (the order created,
        its status (and with it its capabilities), a brief field; the order left the list:
        `left`), bump the user's list tag: data first, tag second. Other changes leave the
        list as it was, and with it the answer the BFF keeps."""
        fields = LISTED_FIELDS.get(change.service, frozenset({"status"}))
        listed = change.created or left or bool(change.fields & fields)
        if not listed:
            return
        version = self.lists.changed(
            change.service, change.user_id, listing(self.world, change.service, change.user_id)
        )
        try:
            version.tag = await self.tags.bump_list(change.service, change.user_id)
        except OrderTagsUnavailable as exc:
            # the source's list changed anyway; a poll asks the source once the kept answer
            # is older than the BFF's list_max_age
            self.stats.tag_write_failures += 1
            log.warning("list tag write failed", extra={"user": change.user_id, "error": str(exc)})

    async def publish(self, change: DataChange, *, left: bool = False) -> dict[str, str]:
        """Set the changed parts' content tags, then, if the source's list changed, the
        user's list tag. Taxi tags carry the order_proc version; the other services have no
        versions of their own, so their tags are bumped. Returns the new part tags."""
        tags = await self._publish_parts(change)
        await self.publish_list(change, left=left)
        if self.world.get(change.service, change.orderid).finished:
            # gone from the list: nobody polls its parts any more, and a poll that still
            # names it finds no tags (no grace): the order is left out as finished
            await self._delete_tags(change)
        return tags

    async def _delete_tags(self, change: DataChange) -> None:
        try:
            await self.tags.delete(change.service, change.orderid)
        except OrderTagsUnavailable as exc:
            self.stats.tag_write_failures += 1
            log.warning("tag delete failed", extra={"orderid": change.orderid, "error": str(exc)})

    async def _publish_parts(self, change: DataChange) -> dict[str, str]:
        parts = self.parts_of(change.service, change.fields)
        if not parts:
            return {}
        try:
            # the write that creates the order says whose it is
            owner = change.user_id if change.created else None
            if change.service == "taxi":
                content = {part: f"v{change.version}" for part in parts}
                await self.tags.set(change.service, change.orderid, content, user_id=owner)
                return content
            if owner is not None:
                content = {part: new_content_tag() for part in parts}
                await self.tags.set(change.service, change.orderid, content, user_id=owner)
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
        await self.publish(change, left=True)
        return change.version

    async def rate(self, service: str, orderid: str, user_id: str, rating: int) -> int:
        """The user rates a finished order; it then leaves the active orders."""
        change = self.world.rate(service, orderid, user_id, rating)
        await self.publish(change, left=True)
        return change.version

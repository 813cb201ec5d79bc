"""Feature services: they change order data, then set the content tags of exactly the parts
holding the changed fields (data first, tag second), through the shared TagWriter: at least
once, from an outbox kept in the world beside the data."""

from __future__ import annotations

from typing import Any

from emulator.source_lists import SourceLists, listing
from emulator.world import DataChange, Order, World
from shared.policy import PollingPolicy
from shared.protocol.tag_writes import ListWrite, OrderWrite
from shared.protocol.tags import new_content_tag
from shared.tag_writer import TagWriter
from shared.wire import ListKey, OrderKey

# the top-level fields an order source's listing shows of an order: its status (and with it
# the change capabilities), and what its brief fields are made of (emulator.documents)
LISTED_FIELDS = {
    "taxi": frozenset({"status", "source", "tariff"}),
    "eats": frozenset({"status", "place", "items"}),
    "grocery": frozenset({"status", "place", "items"}),
}


class Features:
    def __init__(self, world: World, writer: TagWriter, policy: PollingPolicy) -> None:
        self.world = world
        self.writer = writer
        self.policy = policy
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

    async def publish(self, change: DataChange, *, left: bool = False) -> dict[str, str]:
        """Data first, tag second, at least once (docs/protocol.md: Feature data and user
        changes): the change's tag writes are recorded in the world's outbox in the same step
        as the change (no await between them), then sent, each retried by the writer while
        the tag store is unavailable. They are: the changed parts' content tags (taxi tags
        carry the order_proc version; the other services have no versions of their own, so
        their tags are bumped), or, once the order has finished, the delete of its tags
        (gone from the list: nobody polls its parts any more, and a poll that still names it
        finds no tags, no grace: it is left out as finished); then the user's list tag if
        the source's list changed. Returns the new part tags ({} while they are kept for
        retry)."""
        order = OrderKey(change.service, change.orderid)
        if self.world.get(change.service, change.orderid).finished:
            self.writer.record(order, OrderWrite(delete=True))
            written = True
            content = None
        else:
            written, content = self._record_parts(order, change)
        listed = self._record_list(change, left=left)
        tags = await self.writer.deliver_order(order) if written else {}
        if listed is not None:
            await self.writer.deliver_list(listed)
        if tags is None:
            return {}
        return content if content is not None else tags

    def _record_parts(
        self, order: OrderKey, change: DataChange
    ) -> tuple[bool, dict[str, str] | None]:
        """Records the parts' write: whether there is one, and the content set (None for a
        bump: the store makes the new tags)."""
        parts = self.parts_of(change.service, change.fields)
        if not parts:
            return False, None
        # the write that creates the order says whose it is
        owner = change.user_id if change.created else None
        if change.service == "taxi":
            content = {part: f"v{change.version}" for part in parts}
        elif owner is not None:
            content = {part: new_content_tag() for part in parts}
        else:
            self.writer.record(order, OrderWrite(bumps=tuple(parts)))
            return True, None
        self.writer.record(order, OrderWrite(sets=content, owner=owner))
        return True, content

    def _record_list(self, change: DataChange, *, left: bool) -> ListKey | None:
        """After a change of what the order's source lists for its user (the order created,
        its status (and with it its capabilities), a brief field; the order left the list:
        `left`), the user's list tag is bumped. Other changes leave the list as it was, and
        with it the answer the BFF keeps."""
        fields = LISTED_FIELDS.get(change.service, frozenset({"status"}))
        if not (change.created or left or change.fields & fields):
            return None
        version = self.lists.changed(
            change.service, change.user_id, listing(self.world, change.service, change.user_id)
        )
        key = ListKey(change.service, change.user_id)
        self.writer.record(key, ListWrite(on_written=version.tagged))
        return key

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

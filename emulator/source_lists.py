"""What each order source lists for a user, version by version, with the list tag bumped for
each: a source answers with the list tag of the data it serves, and a lagging one (a read
replica behind the primary) serves an older version under that version's tag."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from emulator.documents import change_capabilities, order_limit
from emulator.world import World
from shared.protocol.allowed_changes import SourceAllowance
from shared.upstream_wire import SourceOrder, SourceResponse

# versions kept per (service, user): a replica lags seconds, a user's list changes a few times
# a minute at most
HISTORY = 16
# a replica's list before the first version recorded: the user had nothing there yet
NOTHING_YET = SourceResponse([], SourceAllowance(can_make_more_orders=True))


@dataclass
class ListVersion:
    # when the data changed (the clock's seconds)
    at: float
    answer: SourceResponse
    # the list tag bumped for it; None until the bump lands (or when a later version's bump
    # landed for both: a bump kept for retry is merged with the next one)
    tag: str | None = None

    def tagged(self, tag: str) -> None:
        self.tag = tag


class SourceLists:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._versions: dict[tuple[str, str], deque[ListVersion]] = {}

    def changed(self, service: str, user_id: str, answer: SourceResponse) -> ListVersion:
        """The source's list for the user changed (data first): its new version, tagged once
        the bump lands (`tagged`)."""
        version = ListVersion(self.clock(), answer)
        versions = self._versions.setdefault((service, user_id), deque(maxlen=HISTORY))
        versions.append(version)
        return version

    def as_of(self, service: str, user_id: str, lag_s: float) -> ListVersion:
        """The version a replica `lag_s` behind serves; with no lag given, the one before the
        newest (one data version behind, as a lagging totw serves)."""
        versions = self._versions.get((service, user_id))
        if not versions:
            return ListVersion(0.0, NOTHING_YET)
        if lag_s <= 0:
            return versions[-2] if len(versions) > 1 else ListVersion(0.0, NOTHING_YET)
        replicated = self.clock() - lag_s
        older = [version for version in versions if version.at <= replicated]
        if older:
            return older[-1]
        # every version recorded is newer than the replica: it has what came before them,
        # the oldest one's answer if history was cut, or nothing if the user had no list yet
        return versions[0] if len(versions) == HISTORY else ListVersion(0.0, NOTHING_YET)


def listing(world: World, service: str, user_id: str) -> SourceResponse:
    """What the service's source lists for the user now (the primary's data), each order at
    its version now: a replica that serves this answer later serves that version with it."""
    active = world.active(user_id, service)
    if len(active) < order_limit(service):
        allowed = SourceAllowance(can_make_more_orders=True)
    else:
        allowed = SourceAllowance(False, "active_orders_limit")
    orders = [
        SourceOrder(
            o.orderid,
            o.status,
            o.created_at,
            o.brief(),
            change_capabilities(service, o.status),
            version=o.version,
        )
        for o in active
    ]
    return SourceResponse(orders, allowed)

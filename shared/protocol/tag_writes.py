"""Tag writes a writer keeps until they land (docs/protocol.md: Feature data and user changes):
a tag write is delivered at least once, in order per order. What is pending for one order (or
for one user's list) is one write: a later write of the same key is merged into it, so one
pending write per key is the bound, and the merged write leaves the store as the writes one
after another would have left it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OrderWrite:
    """What is still to be written for one order, in this order: delete its tags, then set
    these parts (the write that creates the order names its owner), then bump these parts."""

    delete: bool = False
    sets: Mapping[str, str] = field(default_factory=dict)
    owner: str | None = None
    bumps: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.delete or self.sets or self.bumps)


@dataclass(frozen=True)
class ListWrite:
    """A bump of one user's list tag. Bumps pending together are one: any new tag says
    "changed". `on_written` learns the tag that landed: only the newest merged write's, since
    the tag stands for the list as it is when it lands, not for an older version of it."""

    on_written: Callable[[str], None] | None = None


def merged_order_write(older: OrderWrite, newer: OrderWrite) -> OrderWrite:
    """The one write doing `older`, then `newer`. A delete supersedes everything before it
    (the order has finished: what it had pending is of no use to anybody). A newer set of a
    part replaces an older set or bump of it; a newer bump of a part is done after the older
    set of it (its tag then is new whatever the set wrote)."""
    if newer.delete:
        return newer
    sets = {**older.sets, **newer.sets}
    bumps = tuple(part for part in older.bumps if part not in newer.sets)
    bumps += tuple(part for part in newer.bumps if part not in bumps)
    return OrderWrite(older.delete, sets, older.owner or newer.owner, bumps)


def supersedes(older: OrderWrite, newer: OrderWrite) -> bool:
    """Whether merging `newer` into `older` gives up something `older` still had to write."""
    return newer.delete and not older.empty


def retry_delay_s(failures: int, base_s: float, cap_s: float, draw: float) -> float:
    """Exponential backoff with full jitter: after the n-th failure in a row, a delay drawn
    uniformly from [0, min(cap, base * 2^(n-1))) (`draw` in [0, 1)). Writers that failed
    together (a tag store outage) come back spread over the window, not all at once."""
    # the exponent is bounded: a write failing for hours must not overflow a float
    window = min(cap_s, base_s * 2.0 ** min(max(failures, 1) - 1, 60))
    return draw * window

"""The client's model of the protocol: the policy rules it holds, its orders and their parts,
a user change on its way, and the view a UI renders. Data only; the behaviour is in the
modules that use it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from client.transport import GZIP_MIN_BYTES

INTERVAL_HEADER = "X-Yataxi-Polling-Interval-Ms"
WAIT_HEADER = "X-Mlutp-Wait"
# the server waited or had news: the next waiting poll may go out at once
POLL_AGAIN_AT_ONCE = frozenset({"news", "wakeup", "timeout", "shutdown"})
SUPPORTED_PART_TYPES = frozenset({"totw", "eats_full", "grocery_full", "taxiroute"})
# keys of a state order that are not the source's brief fields
STATE_KEYS = frozenset(
    {
        "orderid",
        "service",
        "status",
        "tags",
        "need_request",
        "update_status",
        "change_capabilities",
        "parts",
    }
)
ROUTE_STATUSES = frozenset({"driving", "waiting", "transporting"})
# the part types whose requests carry the app's position
POSITIONED_PART_TYPES = frozenset({"totw"})
# the server's bounds on a known order's echo fields (docs/protocol.md: Errors and limits)
MAX_ECHO_FIELDS = 16
MAX_ECHO_BYTES = 2048
# the user changes the app knows: feature → the field it writes; versioned or last-write-wins
FEATURE_FIELDS = {"destination": "destinations", "comment": "comment", "tips": "tips"}
LAST_WRITE_WINS = frozenset({"tips"})

# (service, orderid, data version, unix time): a version of an order's data was seen
VersionSeen = Callable[[str, str, int, float], None]
OrderKey = tuple[str, str]
# (service, orderid, part name)
PartKey = tuple[str, str, str]


@dataclass(frozen=True)
class Rule:
    service: str
    part_name: str
    url: str
    fields: tuple[str, ...]
    polling_type: str
    part_type: str
    priority: int
    required: bool = False
    static: bool = False

    @property
    def tag_defined(self) -> bool:
        return self.polling_type == "tag_defined"


@dataclass(frozen=True)
class Position:
    """The device's position as the app knows it: `point` (lon, lat) and `dx`, its accuracy in
    metres (what a platform's location fix reports beside it). A totw request carries both, in
    the design note's shape; taxiroute's own request takes the point alone."""

    point: tuple[float, float]
    dx: float

    def __post_init__(self) -> None:
        # totw refuses a negative or non-finite accuracy: caught where the app sets it, not
        # as a stale part on every request after
        if not (math.isfinite(self.dx) and self.dx >= 0):
            raise ValueError(f"a position's accuracy is metres, finite and ≥ 0, not {self.dx}")
        if len(self.point) != 2 or not all(math.isfinite(c) for c in self.point):
            raise ValueError(f"a position's point is (lon, lat), not {self.point}")

    def wire(self) -> dict[str, Any]:
        """As part requests carry it (docs/protocol.md: Part endpoints)."""
        return {"point": list(self.point), "dx": self.dx}


@dataclass
class Part:
    tag: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    arrived: bool = False  # has arrived at least once
    stale: bool = False  # the last fetch failed: the fields are old
    failures: int = 0
    retry_at: float = 0.0
    fetched_at: float = 0.0


@dataclass
class PendingChange:
    """A user change sent and not yet seen in a part: the order stays locked, shows the new
    value, and is polled with force. `feature` None: a change made outside this client
    (`user_changed`), known only by the version it returned."""

    feature: str | None
    value: Any
    deadline: float
    # versioned: the data version that shows it (or, after a conflict, the one to wait for
    # before the single retry); last-write-wins: the request's idempotency key
    version: int | None = None
    idempotency_key: str | None = None
    conflict: bool = False
    retried: bool = False

    @property
    def field(self) -> str | None:
        return FEATURE_FIELDS[self.feature] if self.feature is not None else None


@dataclass
class Order:
    orderid: str
    service: str
    status: str
    update_status: str = "actual"
    # the source's brief fields (actual) or what we echo for ourselves (stale)
    brief: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Part] = field(default_factory=dict)
    seen_version: int = 0
    # a user change waits to be seen
    pending_change: PendingChange | None = None
    # kind of change → {"allowed": bool, "reason"?: str}, as the last answer said
    change_capabilities: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def key(self) -> OrderKey:
        return (self.service, self.orderid)

    @property
    def locked(self) -> bool:
        """A user change is on its way: the UI keeps the order locked, polls with force."""
        return self.pending_change is not None


@dataclass(frozen=True)
class OrderView:
    """What a UI renders for one order."""

    orderid: str
    service: str
    status: str
    update_status: str  # "stale": show a loader
    loading: bool  # required parts have not arrived yet
    locked: bool  # a user change is not yet seen
    data: dict[str, Any]
    stale_fields: frozenset[str]
    brief: dict[str, Any]
    # what the user may change now; a stale order allows nothing
    change_capabilities: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientOptions:
    parallel_requests: int = 4
    max_orders_per_part_request: int = 3
    fallback_interval_s: float = 2.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    # the route's own rule (`route_distance_depended`): poll it this often while the car is
    # at most this far (m) from where it goes; farther, every `route_far_every_s`
    route_every_s: tuple[tuple[int, float], ...] = ((500, 2.0), (2_000, 5.0), (10_000, 10.0))
    route_far_every_s: float = 20.0
    poll_route: bool = True
    request_timeout_s: float = 5.0
    # > 0: waiting polls (docs/protocol.md: Waiting poll); 0: plain polling at the interval
    wait_ms: int = 0
    # a user change not seen this long: last-write-wins is retried once, versioned fails
    change_deadline_s: float = 15.0
    # launch with the required parts inline: every order renders from the launch answer
    extended_order_info: bool = True
    # part_type → what its part requests carry beside `orders` (docs/protocol.md: Extended
    # order info); a totw request also carries the app's position (client.position) when it
    # knows it
    part_parameters: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: {
            "totw": {"format_currency": True, "extend_freecars": False, "supported": []}
        }
    )
    # request bodies this long or longer go gzipped where that pays (docs/protocol.md: Request
    # bodies); None: every body plain, as a client that never gzips sends it
    gzip_min_bytes: int | None = GZIP_MIN_BYTES
    # a poll repeating the body it sent last goes as that body's digest (docs/protocol.md:
    # The digest request); False: every body in full, as a client that never sends one
    request_digests: bool = True
    # where the client keeps its orders and tags between app starts (None: nowhere): a
    # restarted app shows them at once and launch revalidates their tags
    state_file: Path | None = None

"""Wire types of the upstream APIs the BFF calls: the order sources and taxiroute. The
emulator answers with these very types, so the two sides cannot drift apart."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from shared.protocol.allowed_changes import ChangeCapability, SourceAllowance
from shared.wire import ClientTagText, ContentTag, OrderId, PartName


class SourceKnownOrder(msgspec.Struct):
    """An order the client knows, as its source is told of it: the content tags the client
    holds for its parts (for taxi, the order_proc version), never the server's tags."""

    orderid: OrderId
    tags: dict[PartName, ContentTag] = {}


class SourceRequest(msgspec.Struct):
    """What an order source is asked: the user (a header) and the client's known orders of
    that service, with their content tags."""

    orders: list[SourceKnownOrder] = []
    # the user's list tag of this service as read before the call (absent: none read): the
    # source serves data at least that new, or says in `list_tag` which it serves, as part
    # upstreams are given the content tag the client holds
    at_least: ContentTag | None = None


class SourceOrder(msgspec.Struct):
    orderid: str
    status: str
    created_at: str
    brief: dict[str, Any] = {}
    # what the user may change in this order now, by kind of change
    change_capabilities: dict[str, ChangeCapability] = {}
    # the order's version in the data this answer shows (e.g. order_proc's): an integer that
    # grows with every change of the order; a lagging replica serves its older one. Absent:
    # the source has no versions, and its orders are not checked against clients' echoes
    version: int | None = None


class SourceResponse(msgspec.Struct):
    """An order source's answer: the user's active orders and its allowed_changes."""

    orders: list[SourceOrder]
    allowed_changes: SourceAllowance
    # the list tag of the data this answer is of (a replica that lags names an older one than
    # `at_least`); absent: the source does not say, and its answer is judged by the created
    # grace alone
    list_tag: ContentTag | None = None


class RouteRequest(msgspec.Struct):
    """The request old clients already send to taxiroute (the route part proxies it), with
    an optional `orderid` (absent: the user's one active order)."""

    orderid: OrderId | None = None
    coordinates: Annotated[list[float], msgspec.Meta(min_length=2, max_length=2)] | None = None
    timestamp: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    use_history: bool = False
    tag: ClientTagText | None = None

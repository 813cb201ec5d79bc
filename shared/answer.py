"""An answered order: what orders/state and launch say of one order
(docs/protocol.md: Polling orders). The one type the poll engine builds, the waiting poll
and extended launch read, and the encoder writes; tagged by `update_status`.

On the wire an order's brief fields (from its source) or echo fields (the client's own, of a
stale order) are fields of the order object itself. A Struct cannot hold fields it does not
name, so they are kept in `brief` / `echo` and spliced into the object when it is encoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from shared.protocol.allowed_changes import ChangeCapability
from shared.wire import OrderKey, PartData


class ActualOrder(msgspec.Struct, tag_field="update_status", tag="actual", omit_defaults=True):
    """An order its source listed now: its status and brief fields are the source's."""

    orderid: str
    service: str
    status: str
    # the client's valid tags, echoed; new tags come only from part endpoints
    tags: dict[str, str]
    need_request: list[str]
    # what the user may change now, from the source
    change_capabilities: dict[str, ChangeCapability]
    # the source's, as it orders the list: a client echoes it, so that the order, stale while
    # its service is down, stays where it is
    created_at: str = ""
    # the source's order version (docs/protocol.md: Orders and their order): the client echoes
    # it, and no later answer gives the order actual at an older one; absent when the source
    # has no versions
    version: int | None = None
    # launch with extended order info: the required parts fetched inline, with their tags
    parts: dict[str, PartData] | None = None
    # the source's brief fields: on the wire, fields of the order object
    brief: dict[str, Any] = {}

    @property
    def key(self) -> OrderKey:
        return OrderKey(self.service, self.orderid)

    @property
    def extra_fields(self) -> dict[str, Any]:
        return self.brief


class StaleOrder(msgspec.Struct, tag_field="update_status", tag="stale", omit_defaults=True):
    """A known order of a service unavailable for this request: only what the client sent,
    so a stale answer never reveals anything new. Nothing may be changed on it."""

    orderid: str
    service: str
    status: str
    tags: dict[str, str]
    # always empty: nothing is fetched of an order the server cannot see (encoded all the same)
    need_request: list[str]
    change_capabilities: dict[str, ChangeCapability]
    # the client's echoed created_at, if it is a well-formed one: the order is placed by it
    created_at: str | None = None
    # the client's echoed version, if it is a well-formed one (shared.protocol.monotonic)
    version: int | None = None
    # the client's own extra fields, echoed back: on the wire, fields of the order object
    echo: dict[str, Any] = {}

    @property
    def key(self) -> OrderKey:
        return OrderKey(self.service, self.orderid)

    @property
    def extra_fields(self) -> dict[str, Any]:
        return self.echo


AnsweredOrder = ActualOrder | StaleOrder

# the names an order object has on the wire besides its brief or echo fields: a brief or echo
# field of one of these names is dropped, it would overwrite the answer's own
ANSWER_FIELDS = frozenset(
    {"update_status", *ActualOrder.__struct_fields__, *StaleOrder.__struct_fields__}
    - {"brief", "echo"}
)

_encoder = msgspec.json.Encoder()


def without_answer_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if name not in ANSWER_FIELDS}


def encode_order(order: AnsweredOrder) -> msgspec.Raw:
    """The order as one JSON object, its brief or echo fields among its own."""
    extra = order.extra_fields
    if not extra:
        return msgspec.Raw(_encoder.encode(order))
    # an empty brief/echo is omitted (its default): the object without it, then its fields
    bare: AnsweredOrder
    if isinstance(order, ActualOrder):
        bare = msgspec.structs.replace(order, brief={})
    else:
        bare = msgspec.structs.replace(order, echo={})
    head = _encoder.encode(bare)
    tail = _encoder.encode(extra)
    return msgspec.Raw(head[:-1] + b"," + tail[1:])


def encode_orders(orders: Sequence[AnsweredOrder]) -> list[msgspec.Raw]:
    return [encode_order(order) for order in orders]

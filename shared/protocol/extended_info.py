"""Launch with extended order info (docs/protocol.md: Extended order info): the required parts
an order needs come inline in the launch answer, so the client renders every order from it
alone. Which parts go inline, and how a fetched part goes in; pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from shared.answer import ActualOrder, AnsweredOrder
from shared.wire import PartData

EXTENDED_ORDER_INFO = "extended_order_info"
# what a part request of a part type carries beside its orders when the launch request says
# nothing for that type (docs/protocol.md: Extended order info): taxi prices formatted for
# display, as the apps ask for them
DEFAULT_PART_PARAMETERS: Mapping[str, Mapping[str, Any]] = {"totw": {"format_currency": True}}
# names of a part request's own (the orders, and the content tags the server adds)
RESERVED_PART_FIELDS = frozenset({"orders", "orderid", "tags"})


def part_parameters(
    part_type: str,
    sent: Mapping[str, Mapping[str, Any]],
    defaults: Mapping[str, Mapping[str, Any]] = DEFAULT_PART_PARAMETERS,
) -> dict[str, Any]:
    """The fields an inline part of this type is fetched with: what the launch request sent
    for its part type (as the app would send them in the part request), else the documented
    defaults; never the part request's own names."""
    chosen = sent[part_type] if part_type in sent else defaults.get(part_type, {})
    return {name: value for name, value in chosen.items() if name not in RESERVED_PART_FIELDS}


def parts_to_inline(
    orders: Sequence[AnsweredOrder], required: Mapping[str, Sequence[str]]
) -> dict[tuple[str, str], list[str]]:
    """(service, part) → the orders to fetch it for: each actual order's required parts that
    it needs (a part the client holds a valid tag of is not fetched again)."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for order in orders:
        if not isinstance(order, ActualOrder):
            continue
        for part in required.get(order.service, ()):
            if part in order.need_request:
                wanted.setdefault((order.service, part), []).append(order.orderid)
    return wanted


def inline_parts(order: AnsweredOrder, fetched: Mapping[str, PartData]) -> AnsweredOrder:
    """The order with its fetched parts under `parts` (the part's fields and its tag) and out
    of `need_request`. A part that failed is left out and stays needed."""
    parts = {
        name: {key: value for key, value in result.items() if key != "orderid"}
        for name, result in fetched.items()
        if "error" not in result
    }
    if not parts or not isinstance(order, ActualOrder):
        return order
    return msgspec.structs.replace(
        order,
        need_request=[name for name in order.need_request if name not in parts],
        parts=parts,
    )

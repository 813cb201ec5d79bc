"""Which order a route request is for (docs/protocol.md: Part endpoints). Old clients send
taxiroute's own request, with no `orderid`: then it is the user's one active order."""

from __future__ import annotations

from collections.abc import Sequence

from shared.errors import BadRequest, NotFound, ServiceUnavailable


def route_orderid(requested: str | None, active: Sequence[str] | None) -> str:
    """The order of the route: the one requested, else the user's one active order.
    `active` is None when the order source did not answer."""
    if requested is not None:
        return requested
    if active is None:
        raise ServiceUnavailable(
            "the order source did not answer; send orderid", code="source_unavailable"
        )
    if not active:
        raise NotFound("the user has no active order to route", code="no_active_order")
    if len(active) > 1:
        raise BadRequest(
            f"the user has {len(active)} active orders: orderid is needed",
            code="orderid_required",
        )
    return active[0]

"""Which order a route request is for (docs/protocol.md: Part endpoints). Old clients send
taxiroute's own request, with no `orderid`: then it is the user's newest active order, the one
an old single-order app shows."""

from __future__ import annotations

from collections.abc import Sequence

from shared.errors import NotFound, ServiceUnavailable
from shared.protocol.ordering import canonical_key


def route_orderid(requested: str | None, active: Sequence[tuple[str, str]] | None) -> str:
    """The order of the route: the one requested, else the user's newest active order.
    `active` is (created_at, orderid) of each order the source lists, None when the order
    source did not answer."""
    if requested is not None:
        return requested
    if active is None:
        raise ServiceUnavailable(
            "the order source did not answer; send orderid", code="source_unavailable"
        )
    if not active:
        raise NotFound("the user has no active order to route", code="no_active_order")
    # the service is the same for all: created_at, then orderid, decide
    _, newest = max(active, key=lambda order: canonical_key(order[0], "", order[1]))
    return newest

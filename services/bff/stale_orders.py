"""What a stale order says (docs/protocol.md: Orders and their order): only what its client
sent, its echoed `created_at` placing it and its echoed `version` kept."""

from __future__ import annotations

from collections.abc import Sequence

from services.bff.known_orders import ParsedKnownOrder
from shared.answer import AnsweredOrder, StaleOrder, without_answer_fields
from shared.protocol.allowed_changes import unavailable_capabilities
from shared.protocol.monotonic import echoed_version
from shared.protocol.ordering import CanonicalKey, canonical_key, created_instant


def stale_order(known_order: ParsedKnownOrder, capabilities: Sequence[str]) -> StaleOrder:
    """Only what the client itself sent: a stale answer never reveals anything new. Nothing
    may be changed on data the server cannot see."""
    echoed = known_order.extras.get("created_at")
    placing = isinstance(echoed, str) and created_instant(echoed) is not None
    echo = without_answer_fields(known_order.extras)
    if echoed is not None and not placing:
        # not one that places the order, but the client's own field: echoed like the rest
        echo["created_at"] = echoed
    version = echoed_version(known_order.extras.get("version"))
    if version is None and "version" in known_order.extras:
        echo["version"] = known_order.extras["version"]  # the same: no version, the client's field
    return StaleOrder(
        orderid=known_order.order.orderid,
        service=known_order.order.service,
        status=known_order.order.status,
        tags=dict(known_order.order.tags),
        need_request=[],
        change_capabilities=unavailable_capabilities(capabilities),
        created_at=echoed if placing and isinstance(echoed, str) else None,
        version=version,
        echo=echo,
    )


def placed_by(order: AnsweredOrder) -> CanonicalKey | None:
    """An answered order's canonical key: an actual one's from its source, a stale one's from
    the created_at its client echoed (None without one)."""
    if order.created_at is None:
        return None
    return canonical_key(order.created_at, order.service, order.orderid)

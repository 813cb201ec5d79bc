"""What the upstreams' answers cost to build: every top-level field an upstream answers with
has a price in work units, and an answer costs the sum of its fields' prices. A call is no
longer the unit of upstream cost once each taxi part comes from its own service: a call of
the chat service builds two fields, a legacy totw call every field of the order.

The table (docs/development.md: Upstream work) prices a field by what building it takes:
1 a value read from the order record, 2 one formatted or localized from it, 5 one that asks
another system (pricing, the performer, routing, geocoding, payments, experiments, chat),
10 the performer info service's slow answer. A field of the same name costs the same in
every service's documents; a field the table does not name (one a test set by hand) costs
DEFAULT_FIELD_COST.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

RECORD = 1
FORMATTED = 2
REMOTE = 5
SLOW = 10
DEFAULT_FIELD_COST = RECORD

FIELD_COSTS: dict[str, int] = {
    # taxi: the order core (fast_info)
    "version": RECORD,
    "status": RECORD,
    "status_info": FORMATTED,
    "driver": REMOTE,
    "vehicle": REMOTE,
    "eta": REMOTE,
    "cost": REMOTE,
    "cost_breakdown": REMOTE,
    "waiting": FORMATTED,
    "ui_buttons": FORMATTED,
    "cancel_rules": FORMATTED,
    "feedback": RECORD,
    "ride_progress": REMOTE,
    "updated_at": RECORD,
    # taxi: the order's settings (rarely_changed)
    "payment": REMOTE,
    "tariff": FORMATTED,
    "comment": RECORD,
    "requirements": RECORD,
    "destinations": REMOTE,
    "source": REMOTE,
    "tips": RECORD,
    "promo": REMOTE,
    "surge": REMOTE,
    "pickup_time": RECORD,
    "corp": REMOTE,
    "change_permissions": FORMATTED,
    # taxi: what never changes (static)
    "route_sharing_url": FORMATTED,
    "currency_rules": FORMATTED,
    "created_at": RECORD,
    "country": RECORD,
    "support_phone": FORMATTED,
    "brand": RECORD,
    "legal_entities": REMOTE,
    "share_text": FORMATTED,
    # taxi: the chat service and the performer info service
    "orderchat": REMOTE,
    "chathistory": REMOTE,
    "orderperformerinfo": SLOW,
    # taxi: what only legacy totw answers (no part carries it)
    "typed_experiments": REMOTE,
    "notifications": REMOTE,
    "alert": FORMATTED,
    "private_data": REMOTE,
    "order_actions": FORMATTED,
    "ads": REMOTE,
    "safety_center": FORMATTED,
    # eats and grocery details (status, eta, payment, ... as above)
    "place": REMOTE,
    "courier": REMOTE,
    "items": REMOTE,
    "total": REMOTE,
    "delivery_address": REMOTE,
    # taxiroute
    "route": REMOTE,
    "driver_position": REMOTE,
    "distance_left_m": RECORD,
    "time_left_s": RECORD,
}
# the order id every answer names: the caller's own question, not built
FREE_FIELDS = frozenset({"orderid"})


def field_cost(name: str) -> int:
    return FIELD_COSTS.get(name, DEFAULT_FIELD_COST)


def fields_work(names: Iterable[str]) -> int:
    """The work of building these fields."""
    return sum(field_cost(name) for name in names if name not in FREE_FIELDS)


def answer_work(answer: Any) -> int:
    """The work of an upstream answer: the sum of its top-level fields' prices (an answer
    that is not an object, or an error, built nothing)."""
    if not isinstance(answer, Mapping):
        return 0
    return fields_work(answer)

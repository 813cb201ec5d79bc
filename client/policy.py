"""The policy the client holds: its rules as launch gives them, and its versions
(docs/protocol.md: Policy changes): when an answer tells it to move, and which orders' parts
a move makes it fetch anew."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from client.model import SUPPORTED_PART_TYPES, Order, Rule


def rules_by_service(polling_policy: Iterable[Mapping[str, Any]]) -> dict[str, list[Rule]]:
    """Launch's `polling_policy`: each service's rules by priority. Rules of a part type the
    client does not know are ignored."""
    rules: dict[str, list[Rule]] = {}
    for raw in polling_policy:
        rule = Rule(**{**raw, "fields": tuple(raw["fields"])})
        if rule.part_type in SUPPORTED_PART_TYPES:
            rules.setdefault(rule.service, []).append(rule)
    for of_service in rules.values():
        of_service.sort(key=lambda r: r.priority)
    return rules


def told_versions(
    held: Mapping[str, str], told: Mapping[str, str], services: Collection[str]
) -> dict[str, str]:
    """The services (of those the client holds a policy of) whose version it is told to hold
    is not the one it holds: it launches again at once, naming them."""
    return {
        service: version
        for service, version in told.items()
        if service in services and held.get(service) != version
    }


def forget_moved_parts(
    orders: Iterable[Order], before: Mapping[str, str], after: Mapping[str, str]
) -> None:
    """A launch handed out another version of an order's service: tags of the old version
    name parts the new policy may not have, so every part of the service is fetched anew
    from the new endpoints, once. A service the client held no version of moves nowhere."""
    for order in orders:
        now = after.get(order.service)
        if before.get(order.service, now) != now:
            order.parts = {}

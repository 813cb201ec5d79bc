"""allowed_changes: one entry per queried service (docs/protocol.md: Orders and their order); and
what the user may change in one order now (docs/protocol.md: Per-order change capabilities)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

SERVICE_UNAVAILABLE = "service_unavailable"


class AllowedChange(msgspec.Struct, omit_defaults=True):
    service: str
    can_make_more_orders: bool
    no_more_orders_reason: str | None = None


class SourceAllowance(msgspec.Struct, omit_defaults=True):
    """What an order source says of its service."""

    can_make_more_orders: bool
    no_more_orders_reason: str | None = None


def allowed_changes(
    queried: Sequence[str], available: Mapping[str, SourceAllowance]
) -> list[AllowedChange]:
    """An unavailable service cannot take more orders: the user must not create a duplicate."""
    result = []
    for service in queried:
        allowance = available.get(service)
        if allowance is None:
            result.append(AllowedChange(service, False, SERVICE_UNAVAILABLE))
        else:
            reason = None if allowance.can_make_more_orders else allowance.no_more_orders_reason
            result.append(AllowedChange(service, allowance.can_make_more_orders, reason))
    return result


class ChangeCapability(msgspec.Struct, omit_defaults=True):
    """Whether the user may make one kind of change to an order now, and why not."""

    allowed: bool
    reason: str | None = None


def unavailable_capabilities(defined: Sequence[str]) -> dict[str, ChangeCapability]:
    """A stale order: nothing may be changed on data the server cannot see."""
    return {name: ChangeCapability(False, SERVICE_UNAVAILABLE) for name in defined}

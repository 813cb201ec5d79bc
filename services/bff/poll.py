"""A request as the edge checked it, the one value the core takes of it: who asks (`Caller`)
and, for a poll, what it asks (`Poll`). Built once in the handlers from the decoded request,
so the user id is read from the headers in one place (services.bff.requests) and never again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from services.bff.known_orders import ParsedKnownOrder


@dataclass(frozen=True)
class Caller:
    """Who a request is for: the user id `require_user` accepted, and the headers forwarded
    upstream with every call made for it (that user id among them, byte for byte)."""

    user_id: str
    headers: Mapping[str, str]


@dataclass(frozen=True)
class Poll:
    """One orders/state or launch poll: its caller, the client's known orders (validated),
    the services it queries, the policy versions it states it holds (service → version), and
    how long it may be held for news (0: answered at once)."""

    caller: Caller
    known_orders: Sequence[ParsedKnownOrder]
    services: Sequence[str]
    stated_versions: Mapping[str, str] = field(default_factory=dict)
    wait_ms: int = 0

    @property
    def user_id(self) -> str:
        return self.caller.user_id

    @property
    def forced(self) -> list[ParsedKnownOrder]:
        """The known orders the client asks to refetch now (force: counted per order)."""
        return [known_order for known_order in self.known_orders if known_order.order.force]

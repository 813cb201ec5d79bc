"""What the BFF's core (the poll engine, the part service, the tag cache) needs of the world
outside it, as protocols; the HTTP clients that serve them are `services.bff.upstreams` and
`shared.order_tags_client`. The core imports no HTTP library, so it is tested with fakes
that count their calls and wired to real clients in `services.bff.resources`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from services.bff.poll import Caller
from shared.upstream_wire import SourceKnownOrder, SourceResponse
from shared.wire import (
    ForcedOrder,
    KeptAnswerOut,
    ListKey,
    OrderKey,
    OrderParts,
    PartData,
    TagsGetResponse,
)


class FetchOutcome(StrEnum):
    OK = "ok"
    EXPIRED = "expired"  # the upstream does not know the order (for this user): it is gone
    STALE = "stale"  # the upstream failed; the client keeps what it has and retries


@dataclass(frozen=True)
class Fetched:
    """What one fetch from a part upstream came to."""

    outcome: FetchOutcome
    body: bytes | None = None


def error_part(orderid: str, outcome: FetchOutcome) -> PartData:
    return {"orderid": orderid, "error": {"update_status": outcome.value}}


class OrderSource(Protocol):
    """One service's order source: the user's active orders and allowed_changes."""

    service: str

    async def list_active(
        self,
        caller: Caller,
        known: Sequence[SourceKnownOrder] = (),
        at_least: str | None = None,
    ) -> SourceResponse | None:
        """The caller's active orders; None when the source is unavailable for this request
        (failed, late, garbage). `known`: the client's known orders of this service, with
        their content tags; `at_least`: the user's list tag read before the call."""
        ...


class PartUpstream(Protocol):
    """The upstream of a part type (totw, eats details, taxiroute, ...)."""

    async def fetch(self, body: Mapping[str, Any], caller: Caller) -> Fetched:
        """The upstream's document of the order `body` names, fetched for `caller`."""
        ...


@dataclass(frozen=True)
class PartKey:
    """A part's data as kept for one user and one question to its upstream: the order, the
    part, the user the upstream checked, and the digest of the parameters that reached it
    (shared.protocol.parts.upstream_params_digest)."""

    service: str
    orderid: str
    part: str
    user_id: str
    params: str


@dataclass(frozen=True)
class KeptPart:
    """A part's fields as its upstream returned them (JSON), fetched after reading the
    content tag `content` at `issued_ms`."""

    content: str
    issued_ms: int
    fields: bytes


class SharedParts(Protocol):
    """Part data shared by every replica (docs/protocol.md: Part endpoints, stage 4). It never
    raises: a failure is a miss, and a part request is answered by its upstream or the memo."""

    async def get(self, keys: Sequence[PartKey]) -> list[KeptPart | None]: ...

    async def put(self, entries: Sequence[tuple[PartKey, KeptPart]]) -> None: ...


class TagStore(Protocol):
    """order_tags as the core uses it; raises shared.errors.OrderTagsUnavailable."""

    async def read(
        self,
        orders: Sequence[OrderKey],
        lists: Sequence[ListKey] = (),
        *,
        force: Sequence[ForcedOrder] = (),
        force_per_minute: int = 0,
        deadline_s: float | None = None,
    ) -> TagsGetResponse: ...

    async def keep_answers(
        self, answers: Sequence[KeptAnswerOut], *, deadline_s: float | None = None
    ) -> None: ...

    async def get(
        self, orders: Sequence[OrderKey], *, deadline_s: float | None = None
    ) -> dict[OrderKey, dict[str, str] | None]: ...

    async def create(
        self, orders: Sequence[OrderParts], *, deadline_s: float | None = None
    ) -> dict[OrderKey, dict[str, str]]: ...

"""Wire types of the client-facing API and of the order sources."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from shared.protocol.allowed_changes import AllowedChange
from shared.protocol.answer_tag import MAX_ANSWER_TAG_LENGTH
from shared.protocol.request_digest import REQUEST_DIGEST_PATTERN
from shared.protocol.waiting import MAX_WAIT_MS
from shared.wire import ClientTagText, OrderId, PartData, PartName, ServiceName

ClientPartName = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Status = Annotated[str, msgspec.Meta(max_length=64)]

INTERVAL_HEADER = "X-Yataxi-Polling-Interval-Ms"
# a superapp has a handful of services; `supported_services` says what the app can show, so a
# name the server cannot parse is ignored, never a 400 (the design's own launch example lists
# "etc..."), and only the first MAX_SUPPORTED_SERVICES names are considered (each name
# queried costs a source call or an allowed_changes entry)
MAX_SUPPORTED_SERVICES = 64
SupportedServices = list[str]
PolicyVersion = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{4,16}$")]
# service → the policy version the client holds (or, launching again, was told to hold)
HeldVersions = Annotated[
    dict[ServiceName, PolicyVersion], msgspec.Meta(max_length=MAX_SUPPORTED_SERVICES)
]


class KnownOrder(msgspec.Struct):
    """A known order as the client sends it; other keys are its echo fields."""

    orderid: OrderId
    service: ServiceName
    status: Status = ""
    tags: Annotated[dict[ClientPartName, ClientTagText], msgspec.Meta(max_length=32)] = {}
    force: bool = False


KNOWN_ORDER_FIELDS = frozenset(KnownOrder.__struct_fields__)


class StateRequest(msgspec.Struct):
    known_orders: list[dict[str, Any]] = []
    supported_services: SupportedServices | None = None
    # hold the answer until a part changes, up to this long (docs/protocol.md: Waiting poll)
    wait_ms: Annotated[int, msgspec.Meta(ge=0, le=MAX_WAIT_MS)] = 0
    # the policy version of each service whose policy the client holds (Policy changes)
    policy_versions: HeldVersions = {}
    # the answer_tag of the answer the client holds: the same answer now is a 204, no body
    answer_tag: Annotated[str, msgspec.Meta(max_length=MAX_ANSWER_TAG_LENGTH)] | None = None
    # the digest request: this alone stands for the full body the client sent last
    # (docs/protocol.md: The digest request); with any other field it is a 400
    request_digest: Annotated[str, msgspec.Meta(pattern=REQUEST_DIGEST_PATTERN)] | None = None


class DigestRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A digest request as it must come: the digest alone (docs/protocol.md: The digest
    request)."""

    request_digest: Annotated[str, msgspec.Meta(pattern=REQUEST_DIGEST_PATTERN)]


class LaunchRequest(msgspec.Struct):
    supported_services: SupportedServices
    known_orders: list[dict[str, Any]] = []
    # what the client can take, e.g. "extended_order_info" (required parts inline)
    supported: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=64)]], msgspec.Meta(max_length=32)
    ] = []
    # part_type → the fields its part requests carry (position, format_currency, ...): the
    # inline parts of extended order info are fetched with them
    part_parameters: Annotated[dict[PartName, dict[str, Any]], msgspec.Meta(max_length=16)] = {}
    # the policy version of each service the client was last told to hold: launch hands it
    # out where it serves it as current or announced (Policy changes)
    policy_versions: HeldVersions = {}


class StateResponse(msgspec.Struct, omit_defaults=True):
    # each an encoded `shared.answer.AnsweredOrder` (its brief or echo fields among its own)
    orders: list[msgspec.Raw]
    allowed_changes: list[AllowedChange]
    # service → the policy version the client is to hold (docs/protocol.md: Policy changes)
    policy_versions: dict[str, str]
    # a digest of the answer encoded without it (shared.protocol.answer_tag), so empty only
    # while it is being digested; every 200 carries it
    answer_tag: str = ""


class LaunchState(msgspec.Struct):
    orders: list[msgspec.Raw]
    allowed_changes: list[AllowedChange]
    # the rules of shared.policy, encoded once (PollingPolicy.launch_rules)
    polling_policy: list[msgspec.Raw]
    policy_versions: dict[str, str]


class LaunchResponse(msgspec.Struct):
    mlutp_orders_state: LaunchState


# --- part endpoints ---------------------------------------------------------------------------


class PartOrder(msgspec.Struct, forbid_unknown_fields=True):
    orderid: OrderId
    tag: ClientTagText | None = None


class PartRequest(msgspec.Struct):
    """The legacy totw request for 1–3 orders. Other fields go to the upstream untouched."""

    orders: list[PartOrder]


class PartResponse(msgspec.Struct):
    orders: list[PartData]

"""Wire types shared across services (msgspec Structs) and the codec helpers around them.

Limits live in the types (msgspec `Meta`), so a decoded value is already a valid one.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Annotated, Any, TypeAlias, TypeVar

import msgspec

from shared.errors import BadRequest, Unauthorized

T = TypeVar("T")

SERVICE_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
ServiceName = Annotated[str, msgspec.Meta(pattern=SERVICE_NAME_PATTERN)]
OrderId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
PartName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
# short and URL-safe, so a client tag (policy version + content + time) stays within 128 chars
CONTENT_TAG_PATTERN = r"^[A-Za-z0-9._:~-]{1,64}$"
ContentTag = Annotated[str, msgspec.Meta(pattern=CONTENT_TAG_PATTERN)]
# a client tag as the server accepts it back (it issues at most 128 chars)
ClientTagText = Annotated[str, msgspec.Meta(max_length=256)]
# free-form JSON (echo fields, a part request's other fields) nests at most this deep
MAX_JSON_DEPTH = 16
# a request body nests at most this deep: free-form JSON at its deepest place (an echo field
# of a known order: body, list, order, echo) plus room; checked on the bytes before decoding,
# so a skipped field is bounded too and the limit does not depend on the interpreter's stack
MAX_BODY_DEPTH = 24
# why a poll that asked to wait was answered when it was (services/orders_state/waiting)
WAIT_HEADER = "X-Mlutp-Wait"
# X-Yandex-UID: 1–128 printable ASCII characters, no spaces or control characters. Checked as
# received and forwarded as it is, so the id checked is the id used.
USER_ID = re.compile(r"[\x21-\x7e]{1,128}")
USER_HEADER = "X-Yandex-UID"
# a request id as forwarded and echoed: the user id's rule, visible ASCII
FORWARDED_ID = USER_ID
# a free-text header forwarded upstream (User-Agent, Accept-Language): visible ASCII, spaces
# and tabs. HTTP allows bytes 0x80-0xFF too, but they cannot pass through as they came, and a
# value is never altered silently: it is refused
FORWARDED_TEXT = re.compile(r"[\t\x20-\x7e]{0,1024}")
MAX_PARTS = 32
MAX_BATCH = 100
MAX_FORCE_PER_MINUTE = 1000

# One order's part as a part endpoint answers it (docs/protocol.md: Part endpoints): its
# orderid, new tag and the rule's fields the upstream returned, or its orderid and an error.
# The fields are the upstream's, named by the policy: a JSON object, not a struct
PartData: TypeAlias = dict[str, Any]
# the rule's fields of an upstream document, cut out and left undecoded (services.bff.field_cut)
PartFields: TypeAlias = dict[str, msgspec.Raw]


class Error(msgspec.Struct):
    code: str
    message: str


# --- order_tags -------------------------------------------------------------------------------


class OrderKey(msgspec.Struct, frozen=True, order=True):
    service: ServiceName
    orderid: OrderId


# the user id as order_tags takes it (a list's key): the checked X-Yandex-UID, as it is
UserId = Annotated[str, msgspec.Meta(pattern=r"^[\x21-\x7e]{1,128}$")]
# the services of one poll whose lists are read with its order tags
MAX_LISTS = 16
# a source's answer kept under its list tag (the body limit bounds it too)
MAX_KEPT_ANSWER_BYTES = 32 * 1024


class ListKey(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one order source lists for one user: its list tag, its kept answer."""

    service: ServiceName
    user_id: UserId


class ForcedOrder(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An order a client forced, and the user who did: counted against that user's budget of
    the order only when the order's tags name the user its owner, so a user naming another's
    order (or one that does not exist) spends nothing and writes nothing (absent: whose force
    it is cannot be checked, and it is not honoured)."""

    service: ServiceName
    orderid: OrderId
    user_id: UserId | None = None

    @property
    def key(self) -> OrderKey:
        return OrderKey(self.service, self.orderid)


class TagsGetRequest(msgspec.Struct, forbid_unknown_fields=True):
    orders: Annotated[list[OrderKey], msgspec.Meta(max_length=MAX_BATCH)]
    # list tags (made when absent) and kept answers, read in the same round trip
    lists: Annotated[list[ListKey], msgspec.Meta(max_length=MAX_LISTS)] = []
    # orders of `orders` a client forced: each is counted against its budget of
    # `force_per_minute` (its user's) in the same round trip, where every replica of the BFF
    # counts it
    force: Annotated[list[ForcedOrder], msgspec.Meta(max_length=MAX_BATCH)] = []
    force_per_minute: Annotated[int, msgspec.Meta(ge=0, le=MAX_FORCE_PER_MINUTE)] = 0


class OrderTags(msgspec.Struct, omit_defaults=True):
    service: str
    orderid: str
    tags: dict[str, str] | None
    # when the order's first tag was written (unix ms); None for an order with none
    created_ms: int | None = None
    # whose order it is, when its first writer said (a poll keeps it for that user alone)
    owner: str | None = None
    # the order was in the request's `force`, within its budget: the force counts
    force_honoured: bool = False
    # when a create last made any of the order's tags (new, or lost): a client's tag issued
    # before that was issued before they were lost (unix ms)
    made_ms: int | None = None


class KeptAnswer(msgspec.Struct):
    """A source's answer, kept under the list tag read before it was asked."""

    tag: str
    at_ms: int
    answer: msgspec.Raw


class ListEntry(msgspec.Struct, omit_defaults=True):
    service: str
    user_id: str
    # the list tag now (made by this read if there was none)
    tag: str
    kept: KeptAnswer | None = None


class TagsGetResponse(msgspec.Struct, omit_defaults=True):
    orders: list[OrderTags]
    lists: list[ListEntry] = []
    # for each entry of the request's `force`, whether it is within its budget
    forced: list[bool] = []


class ListBumpRequest(msgspec.Struct, forbid_unknown_fields=True):
    service: ServiceName
    user_id: UserId


class ListBumpResponse(msgspec.Struct):
    service: str
    user_id: str
    tag: str


class ListKeepRequest(msgspec.Struct, forbid_unknown_fields=True):
    service: ServiceName
    user_id: UserId
    # the list tag read before the source was asked
    tag: ContentTag
    answer: dict[str, Any]
    # kept this long at most (the BFF's list_max_age)
    max_age_ms: Annotated[int, msgspec.Meta(ge=1, le=300_000)] = 30_000


class ListKeepResponse(msgspec.Struct):
    kept: bool


class ListsKeepRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Several sources' answers kept in one call (the answers of one poll, and of the polls
    around it). Every answer is checked before any is written: one bad answer is a 400 and
    none is kept."""

    answers: Annotated[list[ListKeepRequest], msgspec.Meta(min_length=1, max_length=MAX_LISTS)]


class ListsKeepResponse(msgspec.Struct):
    kept: int


class KeptAnswerOut(msgspec.Struct):
    """`ListKeepRequest` as the BFF sends it: the answer encoded once, when it was kept, so
    that its size is known before it joins a call."""

    service: str
    user_id: str
    tag: str
    answer: msgspec.Raw
    max_age_ms: int


class ListsKeepOut(msgspec.Struct):
    answers: list[KeptAnswerOut]


class TagsSetRequest(msgspec.Struct, forbid_unknown_fields=True):
    service: ServiceName
    orderid: OrderId
    tags: Annotated[dict[PartName, ContentTag], msgspec.Meta(min_length=1, max_length=MAX_PARTS)]
    only_if_absent: bool = False
    # the user whose order it is, given by the write that creates the order: a poll of that
    # user keeps the order (stale) for a grace while its source does not list it yet
    user_id: UserId | None = None


class TagsBumpRequest(msgspec.Struct, forbid_unknown_fields=True):
    service: ServiceName
    orderid: OrderId
    parts: Annotated[list[PartName], msgspec.Meta(min_length=1, max_length=MAX_PARTS)]


class OrderParts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    service: ServiceName
    orderid: OrderId
    parts: Annotated[list[PartName], msgspec.Meta(min_length=1, max_length=MAX_PARTS)]
    # whose order it is (the user a source listed it for), kept from the order's first write
    user_id: UserId | None = None
    # the order's version, as its source listed it: the tags made are `v<version>`, the
    # content tag of the order's data at that version (docs/protocol.md: A fleet)
    version: Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)] | None = None


class TagsCreateRequest(msgspec.Struct, forbid_unknown_fields=True):
    """New unique content tags for parts that have none, for many orders at once."""

    orders: Annotated[list[OrderParts], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]


class TagsDeleteRequest(msgspec.Struct, forbid_unknown_fields=True):
    service: ServiceName
    orderid: OrderId


class TagsWriteResponse(msgspec.Struct):
    """The order's tags after the write: what is stored now."""

    service: str
    orderid: str
    tags: dict[str, str]


class TagsDeleteResponse(msgspec.Struct):
    deleted: bool


# --- codec helpers ----------------------------------------------------------------------------

json_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    return json_encoder.encode(value)


def decode(decoder: msgspec.json.Decoder[T], body: bytes) -> T:
    """Decode a request body; any malformed or invalid input is a 400 naming the problem."""
    if not body:
        raise BadRequest("request body is empty; a JSON object is expected")
    try:
        # JSON is UTF-8 (RFC 8259) everywhere, also in the fields the decoder only skips
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(
            f"malformed JSON: not UTF-8 at byte {exc.start}", code="malformed_json"
        ) from exc
    if nested_deeper_than(body, MAX_BODY_DEPTH):
        raise BadRequest(f"JSON nested deeper than {MAX_BODY_DEPTH} levels", code="too_deep")
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"invalid request: {exc}", code="invalid_request") from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {exc}", code="malformed_json") from exc
    except RecursionError as exc:
        raise BadRequest("JSON nested too deeply", code="too_deep") from exc


_BRACKETS_AND_QUOTES = bytes(b for b in range(256) if b not in b'[]{}"')
# an object nests as an array does: one kind of bracket left to count
_AS_ARRAYS = bytes.maketrans(b"{}", b"[]")
_NESTING_STEP = {ord("["): 1, ord("]"): -1}


def nested_deeper_than(body: bytes, limit: int) -> bool:
    """Whether the JSON text opens more than `limit` arrays and objects inside each other.
    Counted on the bytes, before any parser recurses into them; every step is a bytes
    method, so a poll's body costs a few microseconds."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    # escapes first (an escaped backslash, then an escaped quote), so each quote left opens or
    # closes a string; then the brackets outside strings
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    quoted = unescaped.translate(_AS_ARRAYS, _BRACKETS_AND_QUOTES).split(b'"')
    brackets = left = b"".join(quoted[::2])
    for _ in range(limit):
        # each pass takes the innermost pairs away (a pair it makes waits for the next pass):
        # exactly one level of nesting
        left = left.replace(b"[]", b"")
        if not left:
            return False
    # deeper, or not balanced: counted exactly
    return max(accumulate(_NESTING_STEP[byte] for byte in brackets), default=0) > limit


def check_depth(value: Any, where: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Free-form JSON is passed on (echoed, forwarded upstream): never deeper than `limit`."""
    level = [value]
    for _ in range(limit + 1):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return
    raise BadRequest(f"{where} is nested deeper than {limit} levels", code="too_deep")


def check_kept_answer(answer: Any, encoded_bytes: int) -> None:
    """What order_tags refuses to keep (BadRequest): an answer over MAX_KEPT_ANSWER_BYTES or
    nested deeper than free-form JSON may be. The BFF checks the same before sending, so a
    joined keep call never carries an answer that would fail the others with it."""
    if encoded_bytes > MAX_KEPT_ANSWER_BYTES:
        raise BadRequest(
            f"the answer is {encoded_bytes} bytes; at most {MAX_KEPT_ANSWER_BYTES} are kept",
            code="answer_too_large",
        )
    check_depth(answer, "answer")


def user_challenge(header: str = USER_HEADER) -> dict[str, str]:
    """The challenge a 401 must carry (RFC 9110 §11.6.1). The gateway's user header is the
    scheme, an unregistered token: what the client lacks is a gateway that sets it, not
    credentials to type in (a `Basic` challenge would make a browser ask for a password)."""
    return {"WWW-Authenticate": f'{header} realm="mlutp"'}


def checked_user_id(value: str | None, header: str = USER_HEADER) -> str:
    """The user id exactly as received, if it is a well-formed one; else a 401."""
    if value is None:
        raise Unauthorized(
            f"{header} is required", code="unauthorized", headers=user_challenge(header)
        )
    if not USER_ID.fullmatch(value):
        raise Unauthorized(
            f"{header} must be 1 to 128 printable ASCII characters with no spaces",
            code="unauthorized",
            headers=user_challenge(header),
        )
    return value

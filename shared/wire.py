"""Wire types shared across services (msgspec Structs) and the codec helpers around them.

Limits live in the types (msgspec `Meta`), so a decoded value is already a valid one.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

import msgspec

from shared.errors import BadRequest, Unauthorized

T = TypeVar("T")

ServiceName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
OrderId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
PartName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
# short and URL-safe, so a client tag (policy version + content + time) stays within 128 chars
ContentTag = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9._:~-]{1,64}$")]
# a client tag as the server accepts it back (it issues at most 128 chars)
ClientTagText = Annotated[str, msgspec.Meta(max_length=256)]
# free-form JSON (echo fields, a part request's other fields) nests at most this deep
MAX_JSON_DEPTH = 16
# X-Yandex-UID: 1–128 printable ASCII characters, no spaces or control characters. Checked as
# received and forwarded as it is, so the id checked is the id used.
USER_ID = re.compile(r"[\x21-\x7e]{1,128}")
MAX_PARTS = 32
MAX_BATCH = 100


class Error(msgspec.Struct):
    code: str
    message: str


# --- order_tags -------------------------------------------------------------------------------


class OrderKey(msgspec.Struct, frozen=True, order=True):
    service: ServiceName
    orderid: OrderId


class TagsGetRequest(msgspec.Struct, forbid_unknown_fields=True):
    orders: Annotated[list[OrderKey], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]


class OrderTags(msgspec.Struct):
    service: str
    orderid: str
    tags: dict[str, str] | None


class TagsGetResponse(msgspec.Struct):
    orders: list[OrderTags]


class TagsSetRequest(msgspec.Struct, forbid_unknown_fields=True):
    service: ServiceName
    orderid: OrderId
    tags: Annotated[dict[PartName, ContentTag], msgspec.Meta(min_length=1, max_length=MAX_PARTS)]
    only_if_absent: bool = False


class TagsBumpRequest(msgspec.Struct, forbid_unknown_fields=True):
    service: ServiceName
    orderid: OrderId
    parts: Annotated[list[PartName], msgspec.Meta(min_length=1, max_length=MAX_PARTS)]


class OrderParts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    service: ServiceName
    orderid: OrderId
    parts: Annotated[list[PartName], msgspec.Meta(min_length=1, max_length=MAX_PARTS)]


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
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"invalid request: {exc}", code="invalid_request") from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {exc}", code="malformed_json") from exc
    except RecursionError as exc:
        raise BadRequest("JSON nested too deeply", code="too_deep") from exc


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


def checked_user_id(value: str | None, header: str = "X-Yandex-UID") -> str:
    """The user id exactly as received, if it is a well-formed one; else a 401."""
    if value is None:
        raise Unauthorized(f"{header} is required", code="unauthorized")
    if not USER_ID.fullmatch(value):
        raise Unauthorized(
            f"{header} must be 1 to 128 printable ASCII characters with no spaces",
            code="unauthorized",
        )
    return value

"""Request glue of the client-facing endpoints: who the user is, and which of the request's
headers go upstream with their calls."""

from __future__ import annotations

from aiohttp import web

from services.bff.poll import Caller
from shared.errors import BadRequest, Unauthorized
from shared.web import request_id
from shared.wire import FORWARDED_TEXT, USER_HEADER, checked_user_id, user_challenge

FORWARDED_TEXT_HEADERS = ("User-Agent", "Accept-Language")


def require_user(request: web.Request) -> str:
    """The gateway authenticates the user and passes X-Yandex-UID; no user, no answer. Two
    of them are refused too: a gateway that appends the header instead of replacing it must
    not let the client pick which identity counts."""
    values = request.headers.getall(USER_HEADER, [])
    if len(values) > 1:
        raise Unauthorized(
            f"{USER_HEADER} is given {len(values)} times; exactly one is expected",
            code="unauthorized",
            headers=user_challenge(),
        )
    return checked_user_id(values[0] if values else None, USER_HEADER)


def upstream_headers(request: web.Request, user_id: str) -> dict[str, str]:
    """Headers forwarded to upstreams; the request id is generated when absent. `user_id`
    is the value `require_user` accepted, forwarded byte for byte."""
    headers = {}
    for name in FORWARDED_TEXT_HEADERS:
        value = request.headers.get(name)
        if value is None:
            continue
        if not FORWARDED_TEXT.fullmatch(value):
            raise BadRequest(
                f"{name} must be visible ASCII, spaces and tabs (up to 1024): it is forwarded"
                " upstream as it came, never altered",
                code="bad_header",
            )
        headers[name] = value
    headers[USER_HEADER] = user_id
    headers["X-Request-Id"] = request_id(request)
    return headers


def request_caller(request: web.Request, user_id: str) -> Caller:
    """The caller of a request `require_user` accepted as `user_id`: built once, the core
    reads the user id from it and forwards its headers."""
    return Caller(user_id, upstream_headers(request, user_id))

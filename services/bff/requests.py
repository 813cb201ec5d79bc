"""Request glue of the client-facing endpoints: who the user is, what goes upstream with
their calls, and the poll both orders/state and launch make."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from services.bff.keys import LIMITS
from services.bff.known_orders import ParsedKnownOrder, parse_known_orders, queried_services
from shared.errors import Unauthorized
from shared.web import request_id
from shared.wire import checked_user_id

USER_HEADER = "X-Yandex-UID"


def require_user(request: web.Request) -> str:
    """The gateway authenticates the user and passes X-Yandex-UID; no user, no answer. Two
    of them are refused too: a gateway that appends the header instead of replacing it must
    not let the client pick which identity counts."""
    values = request.headers.getall(USER_HEADER, [])
    if len(values) > 1:
        raise Unauthorized(
            f"{USER_HEADER} is given {len(values)} times; exactly one is expected",
            code="unauthorized",
        )
    return checked_user_id(values[0] if values else None, USER_HEADER)


def upstream_headers(request: web.Request, user_id: str) -> dict[str, str]:
    """Headers forwarded to upstreams; the request id is generated when absent. `user_id`
    is the value `require_user` accepted, forwarded byte for byte."""
    headers = {
        name: request.headers[name]
        for name in ("User-Agent", "Accept-Language")
        if name in request.headers
    }
    headers[USER_HEADER] = user_id
    headers["X-Request-Id"] = request_id(request)
    return headers


def parse_poll(
    request: web.Request,
    known_orders: list[dict[str, Any]],
    supported: list[str] | None,
    *,
    only_supported: bool = False,
) -> tuple[list[ParsedKnownOrder], list[str]]:
    """The known orders, validated, and the services the poll queries: those of
    `supported` and of the known orders; with `only_supported` (launch) just `supported`,
    and known orders of other services are ignored."""
    known = parse_known_orders(known_orders, request.app[LIMITS])
    if only_supported:
        services = queried_services(supported, [])
        return [k for k in known if k.order.service in services], services
    return known, queried_services(supported, known)

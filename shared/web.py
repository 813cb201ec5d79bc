"""aiohttp plumbing every service shares: middlewares, /ping, /metrics, JSON bodies, running."""

from __future__ import annotations

import logging
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shared import wire
from shared.aiohttp_internals import stop_lingering
from shared.config import ServiceSettings
from shared.errors import (
    BadRequest,
    DomainError,
    PayloadTooLarge,
    StartupError,
    UnsupportedEncoding,
    UnsupportedMediaType,
)
from shared.logs import AccessLog, request_id_var
from shared.metrics import HttpMetrics

T = TypeVar("T")
S = TypeVar("S", bound=ServiceSettings)

log = logging.getLogger("mlutp.http")

REQUEST_ID_HEADER = "X-Request-Id"
JSON_CONTENT_TYPE = "application/json"

METRICS = web.AppKey("metrics", HttpMetrics)
ACCESS_LOG = web.AppKey("access_log", AccessLog)
# a resource's life in an app: opened on startup, closed on cleanup (`app.cleanup_ctx`)
CleanupContext = Callable[[web.Application], AsyncIterator[None]]


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take: to send a request whole (0: no limit), and to stay idle
    between requests on a keep-alive connection."""

    request_read_timeout_s: float
    keepalive_timeout_s: float


CONNECTION_LIMITS = web.AppKey("connection_limits", ConnectionLimits)
# a check /ping awaits: True when the service can serve
PingCheck = Callable[[], Awaitable[bool]]
PING_CHECK: web.AppKey[PingCheck] = web.AppKey("ping_check")


def json_response(
    value: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=wire.encode(value), status=status, content_type=JSON_CONTENT_TYPE, headers=headers
    )


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> web.Response:
    if details:
        return json_response({**details, "code": code, "message": message}, status=status)
    return json_response(wire.Error(code=code, message=message), status=status)


# the request body codings the services take (docs/protocol.md: Request bodies): aiohttp
# decodes these as the body is read, the size limit counting the decoded bytes; `identity`
# is no coding at all
REQUEST_ENCODINGS = ("gzip", "deflate", "identity")
# what a 415 for another coding names in its Accept-Encoding
ACCEPTED_ENCODINGS = "gzip, deflate"


def unsupported_encoding(given: str | None) -> UnsupportedEncoding:
    """The 415 of a body in another coding; `given` None when it is not known (aiohttp
    refused it before a request was made)."""
    came = "in another coding" if given is None else f"as {given[:60]!r}"
    return UnsupportedEncoding(
        f"the request body must be sent plain or with Content-Encoding: gzip; it came {came}",
        headers={hdrs.ACCEPT_ENCODING: ACCEPTED_ENCODINGS},
    )


def json_media_type(content_type: str, charset: str | None) -> bool:
    """Whether a body's parsed Content-Type (`request.content_type`, `request.charset`) says
    JSON. Only `application/json`: a `+json` type names another format that happens to be
    written in JSON (`application/merge-patch+json` asks for a different operation), and no
    stock client sends one for a plain JSON body. A body declared in another charset would
    not mean what its bytes say read as UTF-8, the only encoding of JSON (RFC 8259 §8.1)."""
    return content_type == JSON_CONTENT_TYPE and (
        charset is None or charset.lower() in ("utf-8", "utf8")
    )


async def read_json(request: web.Request, decoder: msgspec.json.Decoder[T]) -> T:
    """Read and decode the body (read_body's checks, then a malformed one is a 400)."""
    return wire.decode(decoder, await read_body(request))


async def read_body(request: web.Request) -> bytes:
    """Read the body, decoded from its Content-Encoding, for the caller to decode as JSON: a
    body that is not `application/json`, or in a content coding other than gzip or deflate,
    is a 415 (before it is read), over the size limit (as decoded) a 413, one that does not
    decode as its coding says a 400 (the middleware's). No Content-Type is not JSON either
    (RFC 9110 §8.3: the recipient may take it as application/octet-stream): `curl -d` sends
    form data, and a body we guessed at would be a contract nobody wrote."""
    if request.body_exists and not json_media_type(request.content_type, request.charset):
        given = request.headers.get(hdrs.CONTENT_TYPE)
        charset = f"; charset={request.charset}" if request.charset else ""
        raise UnsupportedMediaType(
            "the request body must be sent with Content-Type: application/json; it came "
            + ("with none" if given is None else f"as {request.content_type}{charset}"[:120])
        )
    encoding = request.headers.get(hdrs.CONTENT_ENCODING)
    # aiohttp passes a coding it does not know on undecoded: read as JSON, a plain body
    # said to be `compress` would be taken, and `x-gzip` would be a malformed-JSON 400
    if encoding is not None and encoding.strip().lower() not in REQUEST_ENCODINGS:
        raise unsupported_encoding(encoding)
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        if encoding is not None:
            # not lingered on: aiohttp would read (and so inflate) the rest of a gzip bomb
            # for its lingering time after the answer
            stop_lingering(request.protocol)
        raise PayloadTooLarge(f"the request body is too large: {exc.text}") from exc
    return body


def quoted_segments(values: Sequence[str]) -> list[str]:
    """Values passed on as single path segments, each quoted; never empty, `.` or `..`, which
    a URL resolves to another path (the client library that passes the request on does: the
    path checked would not be the path called)."""
    if any(value in ("", ".", "..") for value in values):
        raise BadRequest("a path segment may not be empty, . or ..")
    return [urllib.parse.quote(value, safe="") for value in values]


def checked_path(raw_path: str) -> str:
    """A request's path as it came (percent-encoded, `request.rel_url.raw_path`), to be passed
    on whole: each segment decoded once and quoted again, so `%2e%2e` is refused as `..` is,
    and an encoded slash too (once decoded on the way, one segment would become several)."""
    segments = [urllib.parse.unquote(value) for value in raw_path.removeprefix("/").split("/")]
    if any("/" in segment for segment in segments):
        raise BadRequest("a path segment may not hold an encoded slash")
    return "/" + "/".join(quoted_segments(segments))


HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def _error_from(exc: web.HTTPException) -> web.Response:
    code = HTTP_CODES.get(exc.status, "http_error")
    response = error_response(exc.status, code, exc.reason)
    if "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response


@web.middleware
async def service_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id, the one mapping of errors to `{"code", "message"}`, metrics and the access
    log. One middleware, not four: each layer costs on every request of the hot path."""
    started = time.perf_counter()
    given_id = request.headers.get(REQUEST_ID_HEADER)
    # an id that is not visible ASCII is refused, not echoed or forwarded altered
    bad_id = given_id is not None and not wire.FORWARDED_ID.fullmatch(given_id)
    request_id = given_id if given_id and not bad_id else uuid.uuid4().hex
    token = request_id_var.set(request_id)
    response: web.StreamResponse
    try:
        try:
            if bad_id:
                raise BadRequest(
                    f"{REQUEST_ID_HEADER} must be 1 to 128 visible ASCII characters",
                    code="bad_header",
                )
            response = await handler(request)
        except DomainError as exc:
            response = error_response(exc.status, exc.code, exc.message, exc.details)
            response.headers.update(exc.headers)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = _error_from(exc)
        except web.RequestPayloadError:
            # a body that does not decode as its Content-Encoding says (gzip over plain text),
            # wherever the handler read it: bad input, not a failure
            response = error_response(
                400, "bad_encoding", "the request body does not decode as its Content-Encoding says"
            )
            response.force_close()
            # closed, not lingered on: aiohttp would read the rest of the body there, meet the
            # same decoding error and log it with a traceback, once per such request
            stop_lingering(request.protocol)
        except Exception:
            log.exception("unhandled error")
            response = error_response(500, "internal_error", "internal error")
        response.headers[REQUEST_ID_HEADER] = request_id
        elapsed = time.perf_counter() - started
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        request.app[METRICS].observe(route, request.method, response.status, elapsed)
        if log.isEnabledFor(logging.INFO) and request.app[ACCESS_LOG].writes(
            response.status, elapsed, response.headers.get(wire.WAIT_HEADER)
        ):
            log.info(
                "request",
                extra={
                    "method": request.method,
                    "path": request.path,
                    "status": response.status,
                    "ms": round(elapsed * 1000, 2),
                },
            )
        return response
    finally:
        request_id_var.reset(token)


def request_id(request: web.Request) -> str:
    return request_id_var.get() or request.headers.get(REQUEST_ID_HEADER) or uuid.uuid4().hex


async def ping(request: web.Request) -> web.Response:
    check = request.app.get(PING_CHECK)
    if check is not None and not await check():
        return error_response(503, "not_ready", "a dependency is not reachable")
    return json_response({"status": "ok"})


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def needs(app: web.Application, key: web.AppKey[T], needed_by: str) -> T:
    """What a resource's setup needs from one set up before it: a StartupError naming both
    when it is missing (the setups are in the wrong order), not a KeyError later."""
    if key not in app:
        raise StartupError(f"{needed_by} needs {key}, which is not set up before it")
    return app[key]


async def _without_server_header(request: web.Request, response: web.StreamResponse) -> None:
    """No `Server` header: aiohttp's names its version (a gift to a scanner) and costs every
    answer, a 304 included, ~36 bytes on a mobile network; no client or operator reads it (a
    gateway in front sends its own). aiohttp sets it before this signal and writes the
    headers after, so this is where it goes."""
    response.headers.popall(hdrs.SERVER, None)


async def _no_store(request: web.Request, response: web.StreamResponse) -> None:
    """`Cache-Control: no-store` on every answer of a client-facing service: each is one
    user's data (an error and a 204 too), and no shared cache between the app and us may keep
    or serve it to another. /ping and /metrics say it too: a kept "ok" would hide an outage."""
    response.headers[hdrs.CACHE_CONTROL] = "no-store"


def create_base_app(
    service: str, settings: ServiceSettings, *, client_facing: bool = False
) -> web.Application:
    """The app every service starts from; `client_facing` for the services an app calls
    through the gateway (launch, orders_state), whose answers no cache may keep."""
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[service_middleware],
    )
    app.on_response_prepare.append(_without_server_header)
    if client_facing:
        app.on_response_prepare.append(_no_store)
    app[METRICS] = HttpMetrics(service)
    app[ACCESS_LOG] = AccessLog(sample=settings.log_access_sample)
    app[CONNECTION_LIMITS] = ConnectionLimits(
        settings.request_read_timeout_s, settings.keepalive_timeout_s
    )
    app.router.add_get("/ping", ping)
    app.router.add_get("/metrics", metrics)
    return app

"""Domain errors. The error middleware maps each to `{"code", "message"}` and its status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DomainError(Exception):
    status: int = 500
    code: str = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        # response headers, e.g. an overload's Retry-After
        self.headers = dict(headers or {})
        # further fields of the error body, e.g. a conflict's current_version
        self.details = details


class BadRequest(DomainError):
    status = 400
    code = "bad_request"


class UnknownRequestDigest(BadRequest):
    """A digest request (orders/state) naming a body this process does not keep for the user:
    another replica's, one from before a restart, evicted, or never sent. Nothing was done;
    the client sends the full body at once (docs/protocol.md: The digest request)."""

    code = "unknown_request_digest"


class Unauthorized(DomainError):
    status = 401
    code = "unauthorized"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    """The change does not apply to the data as it is now (a stale version, a change the
    order's status does not allow); nothing was changed."""

    status = 409
    code = "conflict"


class RequestTimeout(DomainError):
    """The request's body did not arrive within the read timeout."""

    status = 408
    code = "request_timeout"


class PayloadTooLarge(DomainError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(DomainError):
    """A request body that is not `application/json`: refused before it is read."""

    status = 415
    code = "unsupported_media_type"


class UnsupportedEncoding(DomainError):
    """A request body in a content coding the services do not decode: refused before it is
    read, naming the ones they do (RFC 9110 §12.5.3: a 415 says so in Accept-Encoding)."""

    status = 415
    code = "unsupported_encoding"


class BadGateway(DomainError):
    """A service this one passes requests to did not answer (the demo's proxy)."""

    status = 502
    code = "upstream_unavailable"


class ServiceUnavailable(DomainError):
    status = 503
    code = "service_unavailable"


class Overloaded(ServiceUnavailable):
    """Past the cap of polls in progress: poll again after Retry-After."""

    code = "overloaded"


class RedisUnavailable(ServiceUnavailable):
    """Inside order_tags: Redis did not answer within its deadline (a 503 to the caller)."""

    code = "cache_unavailable"


class OrderTagsUnavailable(Exception):
    """Outside order_tags: the service is unreachable, slow, failing or answered garbage.

    Raised by `OrderTagsClient`; callers degrade instead of failing.
    """


class OrderTagsRejected(OrderTagsUnavailable):
    """order_tags answered 4xx: the request was refused, the service itself works. A caller
    that tracks the cache's health must not count it as the cache being down."""


class StartupError(Exception):
    """The service cannot start as configured (a bad policy file, an upstream with no URL);
    the message names the problem and the service exits with it."""

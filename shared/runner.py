"""Running a service: its settings loaded (a bad one stops it with a message), its own
connection handler (a request aiohttp cannot parse gets the services' JSON error; a request
that does not arrive in time gets a 408), its runner and its loop until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import uvloop
from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError
from pydantic import ValidationError

from shared import wire
from shared.aiohttp_internals import (
    answered,
    newest_request_body,
    parsed_request_count,
    stop_lingering,
)
from shared.config import ServiceSettings, with_overrides
from shared.errors import RequestTimeout, StartupError
from shared.logs import Sparse, setup_logging
from shared.web import (
    CONNECTION_LIMITS,
    HTTP_CODES,
    METRICS,
    error_response,
    unsupported_encoding,
)

log = logging.getLogger("mlutp.runner")
S = TypeVar("S", bound=ServiceSettings)


def load_settings(
    service: str, settings_class: type[S], overrides: Mapping[str, Any] | None = None
) -> S:
    """Settings from the environment (and `overrides`, devtools/serve.py); a bad or missing
    value stops the service, naming it."""
    try:
        return with_overrides(settings_class, overrides or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        print(f"{service}: bad configuration: {problems}", file=sys.stderr)
        raise SystemExit(2) from None


_SLOW_HEADERS_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)


class ServiceRequestHandler(web.RequestHandler):
    """The services' connection handler.

    - aiohttp answers a request it cannot parse (a malformed request line or header, a
      Content-Length beside a Transfer-Encoding) itself, before any middleware runs, in plain
      text. This answers it with the services' `{"code", "message"}` body instead.
    - A request must arrive whole within the read timeout of its first byte (aiohttp has no
      such limit): one whose headers are late gets a 408 and its connection is closed; one
      whose body is late gets a 408 from its handler's read, then the connection is closed.
      So a client trickling bytes holds a connection for seconds, not for ever.
    """

    def __init__(
        self,
        *args: Any,
        read_timeout_s: float = 0.0,
        on_slow_request: Callable[[str], None] = lambda missing: None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._read_timeout_s = read_timeout_s
        self._on_slow_request = on_slow_request
        self._read_deadline: asyncio.TimerHandle | None = None
        # the body of the last request whose headers have arrived
        self._receiving: Any = None

    def data_received(self, data: bytes) -> None:
        if self._read_deadline is None and data and self._read_timeout_s > 0:
            # the first bytes of a request: all of it must be here in time
            self._read_deadline = asyncio.get_running_loop().call_later(
                self._read_timeout_s, self._read_late
            )
            self._receiving = None
        queued = parsed_request_count(self)
        super().data_received(data)
        if parsed_request_count(self) > queued:
            # a request's headers have arrived: its body is the one arriving now
            self._receiving = newest_request_body(self)
        if (
            self._read_deadline is not None
            and self._receiving is not None
            and self._receiving.is_eof()
        ):
            self._read_deadline.cancel()
            self._read_deadline = None

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None
        super().connection_lost(exc)

    def _read_late(self) -> None:
        self._read_deadline = None
        if self._receiving is not None:
            self._on_slow_request("body")
            # closed after the answer, not lingered on: aiohttp would read the late body's
            # error there and log it with a traceback, once per slow client
            stop_lingering(self)
            if answered(self, self._receiving):
                # its handler answered without reading it all: nothing is waited for any more
                self.force_close()
                self._receiving.feed_eof()
                return
            # the headers came, the body is late: its handler's read answers 408, and the
            # connection closes after that answer
            self._receiving.set_exception(
                RequestTimeout(f"the request body did not arrive within {self._read_timeout_s} s")
            )
            self.close()
            return
        self._on_slow_request("headers")
        if self.transport is not None:
            body = wire.encode(
                wire.Error(
                    code="request_timeout",
                    message=f"the request did not arrive within {self._read_timeout_s} s",
                )
            )
            self.transport.write(_SLOW_HEADERS_RESPONSE % (len(body), body))
        self.force_close()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if isinstance(exc, ContentEncodingError) and request.writer.output_size == 0:
            # a coding aiohttp knows and cannot decode here (br, zstd without their
            # libraries), refused as it parsed the headers: bad input, a 415 as read_json
            # gives any other coding (docs/protocol.md: Request bodies), and nothing to log
            # (the request here is aiohttp's stand-in: its headers are not the client's)
            refused = unsupported_encoding(None)
            response = error_response(refused.status, refused.code, refused.message)
            response.headers.update(refused.headers)
            response.force_close()
            return response
        # the stock handler logs the error and refuses if a response was begun already
        super().handle_error(request, status, exc, message)
        if status >= 500:
            response = error_response(status, "internal_error", "internal error")
        else:
            reason = (message or "").strip().split("\n", 1)[0].rstrip(":")
            code = HTTP_CODES.get(status, "http_error")
            response = error_response(status, code, reason or "the request is malformed")
        response.force_close()
        return response


class ServiceServer(web.Server):
    """A server whose connections are ServiceRequestHandlers."""

    def __init__(self, *args: Any, handler_kwargs: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handler_kwargs = handler_kwargs

    def __call__(self) -> web.RequestHandler:
        return ServiceRequestHandler(self, loop=asyncio.get_running_loop(), **self.handler_kwargs)


class ServiceRunner(web.AppRunner):
    """An AppRunner whose connections are ServiceRequestHandlers, limited as the app's
    settings say (CONNECTION_LIMITS); the app's own startup and cleanup are the stock ones."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        limits = app.get(CONNECTION_LIMITS)
        if limits is not None:
            kwargs.setdefault("keepalive_timeout", limits.keepalive_timeout_s)
        super().__init__(app, **kwargs)
        # what each connection's handler is made with (the runner's and the server's own
        # arguments left out)
        self.handler_kwargs = {
            k: v
            for k, v in kwargs.items()
            if k not in ("handle_signals", "shutdown_timeout", "handler_cancellation")
        }
        if limits is not None:
            self.handler_kwargs["read_timeout_s"] = limits.request_read_timeout_s
        # each slow request is counted; a warning says it happens, at most once in a while:
        # 800 slow clients are not 800 lines
        warnings = Sparse()
        read_timeout_s = limits.request_read_timeout_s if limits is not None else None

        def on_slow_request(missing: str) -> None:
            if METRICS in app:
                app[METRICS].slow_requests.labels(missing).inc()
            warnings.warning(
                log,
                "a request did not arrive whole within the read timeout: its connection is closed",
                missing,
                missing=missing,
                read_timeout_s=read_timeout_s,
            )

        self.handler_kwargs["on_slow_request"] = on_slow_request

    async def _make_server(self) -> web.Server:
        # BaseRunner's hook for the server it runs (shared.aiohttp_internals)
        stock = await super()._make_server()
        return ServiceServer(
            stock.request_handler,
            request_factory=stock.request_factory,
            handler_cancellation=stock.handler_cancellation,
            handler_kwargs=self.handler_kwargs,
        )


async def serve(
    app: web.Application,
    host: str,
    port: int,
    *,
    shutdown_timeout_s: float,
    handler_cancellation: bool,
    backlog: int = 128,
    on_listening: Callable[[], None] = lambda: None,
) -> None:
    """Serve `app` until cancelled or SIGINT/SIGTERM (GracefulExit); in-flight requests get
    `shutdown_timeout_s` to finish. web.run_app's loop, with a ServiceRunner."""
    runner = ServiceRunner(
        app,
        handle_signals=True,
        shutdown_timeout=shutdown_timeout_s,
        access_log=None,
        handler_cancellation=handler_cancellation,
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, backlog=backlog).start()
        on_listening()
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def run_service(
    service: str,
    settings_class: type[S],
    create_app: Callable[[S], web.Application],
    *,
    handler_cancellation: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> None:
    """Run one service until SIGINT/SIGTERM; in-flight requests get `shutdown_timeout_s`.
    `handler_cancellation`: a client that hangs up cancels its handler. Off by default: a
    handler that writes data, then tags, must not be stopped between the two."""
    settings = load_settings(service, settings_class, overrides)
    try:
        app = create_app(settings)
    except StartupError as exc:
        print(f"{service}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    setup_logging(service, settings.log_level, settings.log_json)
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    main = loop.create_task(
        serve(
            app,
            settings.host,
            settings.port,
            shutdown_timeout_s=settings.shutdown_timeout_s,
            handler_cancellation=handler_cancellation,
            backlog=settings.listen_backlog,
            on_listening=lambda: log.info(
                "listening", extra={"url": f"http://{settings.host}:{settings.port}"}
            ),
        )
    )
    try:
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    except StartupError as exc:
        # a resource its setup could not open as configured (no Redis to start): said, no
        # traceback
        print(f"{service}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as exc:
        # the port is taken (or the address is not ours): say so and exit, no traceback
        print(
            f"{service}: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    finally:
        if not main.done():
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(main)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

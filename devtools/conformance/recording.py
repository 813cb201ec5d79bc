"""The recording pass-through: launch, orders/state and the part endpoints, passed on to the
real services as they are, each exchange recorded (when, what was sent, what came back). It
can answer the next polls itself with a 503 and a Retry-After, as a shedding server would."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

import demo
from shared.errors import BadRequest
from shared.web import checked_path, error_response

# what the checks read of a request's and an answer's headers (a client may gzip a body:
# docs/protocol.md: Request bodies)
REQUEST_HEADERS = ("X-Yandex-UID", "Content-Encoding")
ANSWER_HEADERS = ("X-Yataxi-Polling-Interval-Ms", "X-Mlutp-Wait", "Retry-After")
LAUNCH_PATH = "/4.0/launch"
POLL_PATH = "/mlutp/v1/orders/state"
# the feature services' user change endpoints (the emulator's)
FEATURES_PATH = "/emulator/v1/features/"


@dataclass
class Exchange:
    at: float  # monotonic seconds, when the request came
    path: str
    user: str
    request: dict[str, Any]
    request_headers: dict[str, str]
    status: int
    answer_headers: dict[str, str]
    # the answer's body; a 204's is the answer it stands for (the 200 whose answer_tag the
    # request sent back)
    answer: dict[str, Any] | None
    # monotonic seconds, when the answer went back
    answered: float = 0.0
    # the client had gone before its answer came (a poll it gave up, for one that names a
    # user's change): it never saw this answer
    abandoned: bool = False
    # a digest request (docs/protocol.md: The digest request): the digest sent, `request`
    # then being the full body it stands for; `digest_stood_for` False when it did not stand
    # for the client's previous full body (`request` is then the digest request itself)
    digest: str | None = None
    digest_stood_for: bool = True

    @property
    def kind(self) -> str:
        if self.path == LAUNCH_PATH:
            return "launch"
        if self.path == POLL_PATH:
            return "poll"
        if self.path.startswith(FEATURES_PATH):
            return "feature"
        return "part"


@dataclass
class Recorder:
    launch_url: str
    orders_state_url: str
    emulator_url: str
    exchanges: list[Exchange] = field(default_factory=list)
    # polls still to be answered 503 by the pass-through itself, and the Retry-After it gives
    shed_polls: int = 0
    retry_after_s: int = 2
    # (user, answer_tag) → the orders/state answer that carried it
    _tagged: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # user → the last full orders/state body its client sent (as decoded) and that body
    _last_full: dict[str, tuple[bytes, dict[str, Any]]] = field(default_factory=dict)
    # told of every exchange recorded: a scenario awaits what the client does
    recorded: asyncio.Condition = field(default_factory=asyncio.Condition)

    def of(self, user: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.user == user]

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with self.recorded:
            await self.recorded.wait_for(predicate)

    async def _record(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)
        async with self.recorded:
            self.recorded.notify_all()

    def _resolve(
        self, user: str, raw: bytes, body: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None, bool]:
        """An orders/state body as the checks read it: a digest request as the full body it
        stands for, when it is the digest of the client's previous full body (the body, the
        digest, and whether it stood for it); a full body is kept for the next digest."""
        digest = body.get("request_digest") if list(body) == ["request_digest"] else None
        if not isinstance(digest, str):
            self._last_full[user] = (raw, body)
            return body, None, True
        last = self._last_full.get(user)
        if last is None or digest_of(last[0]) != digest:
            return body, digest, False
        return last[1], digest, True

    async def handle(self, request: web.Request) -> web.Response:
        try:
            # the path passed on is the one checked: the session below resolves dot segments,
            # so features/../faults would reach the emulator's control API as a "feature"
            path = checked_path(request.rel_url.raw_path)
        except BadRequest as exc:
            return error_response(exc.status, exc.code, exc.message)
        raw = await request.read()
        user = request.headers.get("X-Yandex-UID", "")
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        sent = {k: request.headers[k] for k in REQUEST_HEADERS if k in request.headers}
        at = time.monotonic()
        digest: str | None = None
        stood_for = True
        if request.path == POLL_PATH:
            body, digest, stood_for = self._resolve(user, raw, body)
        if request.path == POLL_PATH and self.shed_polls > 0:
            self.shed_polls -= 1
            headers = {"Retry-After": str(self.retry_after_s)}
            payload = b'{"code": "overloaded", "message": "conformance kit: shed"}'
            await self._record(
                Exchange(
                    at,
                    request.path,
                    user,
                    body,
                    sent,
                    503,
                    headers,
                    None,
                    at,
                    digest=digest,
                    digest_stood_for=stood_for,
                )
            )
            return web.Response(
                status=503, body=payload, content_type="application/json", headers=headers
            )
        base = self.orders_state_url
        if request.path == LAUNCH_PATH:
            base = self.launch_url
        elif request.path.startswith(FEATURES_PATH):
            base = self.emulator_url
        # the body is passed on as aiohttp read it, decoded: its coding is not passed on (a
        # body the kit could not decode has already failed the read above, as it would fail
        # the service's)
        forwarded = {
            k: v
            for k, v in request.headers.items()
            if k.lower()
            not in ("host", "content-length", "transfer-encoding", "connection", "content-encoding")
        }
        session: aiohttp.ClientSession = request.app[SESSION]
        url = base + path
        try:
            try:
                payload, status, answer_headers, content_type = await _forward(
                    session, url, raw, forwarded
                )
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                # a kept-alive connection to the process a restart replaced (closed or reset):
                # sent again at once on a new one, as a balancer does
                payload, status, answer_headers, content_type = await _forward(
                    session, url, raw, forwarded
                )
        except aiohttp.ClientError:
            # the service is restarting (a scenario deploys a new policy): as a balancer would
            payload, status, answer_headers, content_type = _SERVICE_DOWN
        answer: dict[str, Any] | None = None
        if status == 204:
            answer = self._tagged.get((user, str(body.get("answer_tag"))))
        else:
            try:
                parsed = json.loads(payload)
            except ValueError:
                parsed = None
            # an error's body too: a feature's 409 names the version to catch up to
            answer = parsed if isinstance(parsed, dict) else None
            if status == 200 and answer is not None and "answer_tag" in answer:
                self._tagged[(user, str(answer["answer_tag"]))] = answer
        gone = request.transport is None or request.transport.is_closing()
        await self._record(
            Exchange(
                at,
                request.path,
                user,
                body,
                sent,
                status,
                answer_headers,
                answer,
                time.monotonic(),
                gone,
                digest,
                stood_for,
            )
        )
        return web.Response(
            status=status,
            body=payload or None,
            headers={**answer_headers, "Content-Type": content_type.split(";")[0]}
            if status != 204
            else answer_headers,
        )


def digest_of(raw: bytes) -> str:
    """What a client sends for this full body (docs/protocol.md: The digest request)."""
    digest = hashlib.sha256(raw).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


async def _forward(
    session: aiohttp.ClientSession, url: str, raw: bytes, headers: dict[str, str]
) -> tuple[bytes, int, dict[str, str], str]:
    """One POST to the service: the answer's body, status, recorded headers and type."""
    async with session.post(url, data=raw, headers=headers) as upstream:
        return (
            await upstream.read(),
            upstream.status,
            {k: upstream.headers[k] for k in ANSWER_HEADERS if k in upstream.headers},
            upstream.headers.get("Content-Type", "application/json"),
        )


SESSION = web.AppKey("session", aiohttp.ClientSession)
_SERVICE_DOWN: tuple[bytes, int, dict[str, str], str] = (
    b'{"code": "bad_gateway", "message": "conformance kit: service down"}',
    502,
    {},
    "application/json",
)
HARNESS = Path(__file__).resolve().parent / "harness.html"
DEMO_STATIC = Path(demo.__file__).resolve().parent / "static"


def create_app(recorder: Recorder) -> web.Application:
    app = web.Application()

    async def session_ctx(app: web.Application) -> AsyncIterator[None]:
        app[SESSION] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        yield
        await app[SESSION].close()

    app.cleanup_ctx.append(session_ctx)
    # the browser client's page and modules, from this origin: its requests come here
    app.router.add_get("/conformance/", _harness)
    app.router.add_static("/static/", DEMO_STATIC)
    app.router.add_post("/{tail:.*}", recorder.handle)
    return app


async def _harness(request: web.Request) -> web.FileResponse:
    return web.FileResponse(HARNESS)

"""How the client reaches the server: the replicas of a service taken in turn, one request
sent again at once elsewhere when a replica refused it, timeouts, and the request counters.
It decides nothing of the protocol: what an answer means is the caller's."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import itertools
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from multidict import CIMultiDict

from client.wire_bytes import (
    CONTENT_ENCODING_LINE,
    GZIP_LEVEL,
    WireBytes,
    request_line,
    status_line,
)

# a request body this long or longer is gzipped, and sent so when that makes the request
# smaller, its Content-Encoding line counted (docs/protocol.md: Request bodies): a poll's known
# orders (tags, echo fields) shrink by a third or more; a part request of an order or two
# would gain little or grow
GZIP_MIN_BYTES = 256


# the error of a digest request whose body the server does not keep (docs/protocol.md: The
# digest request): the full body goes at once, no error and no backoff
UNKNOWN_DIGEST = "unknown_request_digest"


def request_digest(plain: bytes) -> str:
    """The digest of a full body (docs/protocol.md: The digest request): the first 16 bytes
    of SHA-256 of its JSON bytes, before any gzip, in unpadded base64url."""
    digest = hashlib.sha256(plain).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def encoded(plain: bytes, gzip_min_bytes: int | None) -> tuple[bytes, dict[str, str]]:
    """The body to send and its Content-Encoding header, if any; `gzip_min_bytes` None: the
    body goes plain whatever its size (what every client may do)."""
    if gzip_min_bytes is not None and len(plain) >= gzip_min_bytes:
        packed = gzip.compress(plain, compresslevel=GZIP_LEVEL, mtime=0)
        if len(packed) + CONTENT_ENCODING_LINE < len(plain):
            return packed, {"Content-Encoding": "gzip"}
    return plain, {}


@dataclass
class ClientStats:
    requests: int = 0
    bytes_received: int = 0
    errors: int = 0
    # answers with a 5xx status (counted among errors too)
    server_errors: int = 0
    poll_latencies: list[float] = field(default_factory=list)
    part_requests: int = 0
    # answer bytes by the request's path: which requests the bytes to the app are
    bytes_by_path: Counter[str] = field(default_factory=Counter)
    # both ways, as they cross a mobile network behind a gzipping gateway: wire_bytes.KINDS
    wire: Counter[str] = field(default_factory=Counter)
    # gzipped bodies and headers, both ways, by "<path> <status>": which exchanges cost most
    wire_by_exchange: Counter[str] = field(default_factory=Counter)
    # how many of each "<path> <status>" there were
    exchanges: Counter[str] = field(default_factory=Counter)
    # digest requests sent, and those the server did not keep the body of (sent again in full)
    digests: int = 0
    digest_misses: int = 0

    def received(self, url: str, size: int) -> None:
        self.bytes_received += size
        self.bytes_by_path[urlsplit(url).path] += size

    def exchanged(
        self,
        response: aiohttp.ClientResponse,
        sent: bytes,
        payload: bytes,
        *,
        plain: bytes | None = None,
    ) -> None:
        """Count one exchange's bytes both ways: `sent` the request body, `payload` the
        answer's body; the header blocks are the ones the client and the server wrote. With
        `plain` (the body before the client encoded it, itself when it did not), the request
        is counted as it went; without, as a client that gzips when it pays would send it."""
        info = response.request_info
        start = request_line(info.method, info.url.raw_path_qs)
        if plain is None:
            request = WireBytes.of(start, info.headers.items(), sent, gzip_if_smaller=True)
        else:
            request = WireBytes.as_sent(start, info.headers.items(), plain, sent)
        answer = WireBytes.of(
            status_line(response.status, response.reason), response.raw_headers, payload
        )
        for kind, size in (
            ("request_body", request.body),
            ("request_body_gzip", request.body_gzip),
            ("request_headers", request.headers),
            ("response_body", answer.body),
            ("response_body_gzip", answer.body_gzip),
            ("response_headers", answer.headers),
        ):
            self.wire[kind] += size
        # a digest request (docs/protocol.md: The digest request) is an exchange of its own
        digest = (plain if plain is not None else sent).startswith(b'{"request_digest"')
        exchange = f"{info.url.path} {response.status}{' digest' if digest else ''}"
        self.exchanges[exchange] += 1
        self.wire_by_exchange[exchange] += (
            request.body_gzip + request.headers + answer.body_gzip + answer.headers
        )


@dataclass(frozen=True)
class Reply:
    """One request's outcome: `status` 0 when there was no answer at all."""

    status: int
    # the answer's JSON object, on any status; None when it was none
    body: dict[str, Any] | None
    headers: Mapping[str, str]
    elapsed_s: float
    # the connection was refused or dropped (not slow): another replica may be asked
    refused: bool = False

    @property
    def ok(self) -> dict[str, Any] | None:
        """The JSON object of a 200, else None."""
        return self.body if self.status == 200 else None


def json_object(payload: bytes) -> dict[str, Any] | None:
    """The JSON object of an answer, or None for anything else."""
    try:
        answer = json.loads(payload)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def retry_after_seconds(value: str, fallback_s: float) -> float:
    """Retry-After in seconds (the services send whole seconds; an HTTP date is not used)."""
    try:
        return max(0.0, float(value))
    except ValueError:
        return fallback_s


class Replicas:
    """The URLs of one service. A mobile app has one (its balancer); several are replicas
    reached directly (as the load test runs them), taken in turn request by request, the way
    a balancer does it: one that refused a connection is passed over for `down_s` (nginx's
    `max_fails=1 fail_timeout`), and the request is sent again at once to the next."""

    def __init__(self, urls: str | Sequence[str], down_s: float = 5.0) -> None:
        listed = [urls] if isinstance(urls, str) else list(urls)
        self.urls = [url.rstrip("/") for url in listed]
        self.down_s = down_s
        self._turn = itertools.count()
        self._down_until: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self.urls)

    def pick(self, avoid: str | None = None) -> str:
        now = time.monotonic()
        start = next(self._turn)
        for step in range(len(self.urls)):
            url = self.urls[(start + step) % len(self.urls)]
            if url != avoid and self._down_until.get(url, 0.0) <= now:
                return url
        # every one is down (or the only one): ask in turn anyway
        return self.urls[start % len(self.urls)]

    def failed(self, url: str) -> None:
        if len(self.urls) > 1:
            self._down_until[url] = time.monotonic() + self.down_s


class Transport:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        user_id: str,
        user_agent: str,
        timeout_s: float,
        stats: ClientStats,
        gzip_min_bytes: int | None = GZIP_MIN_BYTES,
        request_digests: bool = True,
    ) -> None:
        self.session = session
        self.gzip_min_bytes = gzip_min_bytes
        # False: every body in full, as a client that never sends a digest
        self.request_digests = request_digests
        self.headers = {"X-Yandex-UID": user_id, "User-Agent": user_agent}
        self.timeout_s = timeout_s
        self.stats = stats
        # per kind of request revalidated: the last answer's answer_tag and body (the server
        # answers 204 No Content when the answer to the next such request would be the same)
        self._held: dict[str, tuple[str, dict[str, Any]]] = {}
        # per path sent by digest: the last full body sent there and its digest, once the
        # server answered it (a 200 or 204: it was read, so kept); the next same body goes as
        # the digest alone
        self._full: dict[str, tuple[bytes, str]] = {}

    async def post(
        self,
        replicas: Replicas,
        path: str,
        body: dict[str, Any],
        *,
        extra_timeout_s: float = 0,
        revalidate: str | None = None,
        digest: bool = False,
    ) -> Reply:
        """POST to the next replica; one that refused is passed over and the request sent at
        once to another (every request here is a read, so asking again is safe). With
        `revalidate` (a kind of request), the last such answer's `answer_tag` goes in the
        body, and a 204 comes back as that answer again: the client keeps what it has. With
        `digest` (orders/state), a body the same as the last one sent goes as its digest."""
        held = self._held.get(revalidate) if revalidate else None
        if held:
            body = {**body, "answer_tag": held[0]}
        # the bytes `call` sends, to compare with the last ones and digest them
        plain = json.dumps(body).encode()
        digest = digest and self.request_digests
        url = replicas.pick()
        reply = await self._send(url, path, body, plain, digest, extra_timeout_s)
        if reply.refused and len(replicas) > 1:
            replicas.failed(url)
            url = replicas.pick(avoid=url)
            reply = await self._send(url, path, body, plain, digest, extra_timeout_s)
        if revalidate:
            tag = reply.ok.get("answer_tag") if reply.ok is not None else None
            if reply.status == 204 and held:
                reply = dataclasses.replace(reply, status=200, body=held[1])
            elif reply.ok is not None and isinstance(tag, str):
                self._held[revalidate] = (tag, reply.ok)
        if reply.status and reply.ok is None:
            # an answer that is no answer: a 4xx/5xx, or a 200 that is not a JSON object
            self.stats.errors += 1
            self.stats.server_errors += reply.status >= 500
        return reply

    async def _send(
        self,
        url: str,
        path: str,
        body: dict[str, Any],
        plain: bytes,
        digest: bool,
        extra_timeout_s: float,
    ) -> Reply:
        """One request of this body to one replica: as its digest when `digest` and it is the
        body this path sent last, answered; in full at once when the server does not keep
        that body (another replica, a restart), which is no error."""
        if digest:
            last = self._full.get(path)
            if last is not None and last[0] == plain:
                self.stats.digests += 1
                small = {"request_digest": last[1]}
                reply = await self.call(f"{url}{path}", small, extra_timeout_s=extra_timeout_s)
                if not (reply.status == 400 and (reply.body or {}).get("code") == UNKNOWN_DIGEST):
                    return reply
                self.stats.digest_misses += 1
            # this body is now the one sent last: a digest stands for it once it is answered
            self._full.pop(path, None)
        reply = await self.call(f"{url}{path}", body, extra_timeout_s=extra_timeout_s)
        if digest and reply.status in (200, 204):
            self._full[path] = (plain, request_digest(plain))
        return reply

    async def call(
        self,
        url: str,
        body: dict[str, Any],
        *,
        extra_timeout_s: float = 0,
    ) -> Reply:
        """One POST; only no answer at all counts as an error here (a feature's 409 is an
        answer)."""
        started = time.monotonic()
        self.stats.requests += 1
        # encoded here, as aiohttp's json= would, to count the bytes sent
        plain = json.dumps(body).encode()
        sent, encoding = encoded(plain, self.gzip_min_bytes)
        try:
            async with self.session.post(
                url,
                data=sent,
                headers={**self.headers, "Content-Type": "application/json", **encoding},
                timeout=aiohttp.ClientTimeout(total=self.timeout_s + extra_timeout_s),
            ) as response:
                payload = await response.read()
                self.stats.exchanged(response, sent, payload, plain=plain)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.stats.errors += 1
            # refused or dropped, not slow: a timeout asked again elsewhere would double it
            refused = isinstance(exc, aiohttp.ClientConnectionError) and not isinstance(
                exc, TimeoutError
            )
            return Reply(0, None, CIMultiDict(), time.monotonic() - started, refused=refused)
        self.stats.received(url, len(payload))
        return Reply(
            response.status, json_object(payload), response.headers, time.monotonic() - started
        )

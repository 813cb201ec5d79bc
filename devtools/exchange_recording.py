"""Exchanges as the reference clients make them, recorded to be replayed through a gateway
(devtools/gateway.py): each request's headers and body as the client sent them, and what it
was answered; a digest request with the full body it stands for."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from shared.protocol.request_digest import is_digest_request

# the gateway's gzip level (devtools/gateway.py), as client.wire_bytes models it
GZIP_LEVEL = 6
# what h2load and the proxy set themselves, so not replayed from a recorded request
NOT_REPLAYED = {"host", "content-length", "connection", "transfer-encoding"}
WAIT_MS = re.compile(rb'"wait_ms": *(\d+)')


@dataclass
class Recorded:
    """One exchange as a client made it: what to send again, and what it was answered."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes
    status: int

    @property
    def path(self) -> str:
        return urlsplit(self.url).path

    @property
    def key(self) -> str:
        """As client.transport.ClientStats counts exchanges: `<path> <status>`, and ` digest`
        for a digest request."""
        digest = " digest" if is_digest_request(self.plain_body()) else ""
        return f"{self.path} {self.status}{digest}"

    @property
    def user(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "x-yandex-uid"), "")

    @property
    def gzipped(self) -> bool:
        return any(k.lower() == "content-encoding" and v.lower() == "gzip" for k, v in self.headers)

    def plain_body(self) -> bytes:
        return gzip.decompress(self.body) if self.gzipped else self.body

    def with_plain_body(self, plain: bytes) -> Recorded:
        """The same request with another body, encoded as the client encoded this one."""
        body = gzip.compress(plain, compresslevel=GZIP_LEVEL, mtime=0) if self.gzipped else plain
        return Recorded(self.method, self.url, self.headers, body, self.status)

    def gzipped_if_smaller(self) -> Recorded:
        """The request with its body gzipped (and `Content-Encoding: gzip`) where that makes it
        smaller, as an app that gzips its request bodies would send it."""
        if self.gzipped or not self.body:
            return self
        body = gzip.compress(self.body, compresslevel=GZIP_LEVEL, mtime=0)
        if len(body) + len("content-encoding: gzip\r\n") >= len(self.body):
            return self
        headers = [*self.headers, ("Content-Encoding", "gzip")]
        return Recorded(self.method, self.url, headers, body, self.status)

    def with_wait_ms(self, wait_ms: int) -> Recorded:
        """The same request with another `wait_ms`, padded with spaces to the same length (a
        timeout replayed without waiting the client's whole wait, at the client's bytes)."""
        plain = self.plain_body()
        match = WAIT_MS.search(plain)
        if match is None:
            return self
        digits = str(wait_ms).encode()
        old = match.group(1)
        if len(digits) > len(old):
            raise ValueError(f"wait_ms {wait_ms} is longer than the recorded {old.decode()}")
        start, end = match.span(1)
        padded = plain[:start] + b" " * (len(old) - len(digits)) + digits + plain[end:]
        return self.with_plain_body(padded)

    def with_body_field(self, name: str, value: Any) -> Recorded:
        """The same request with one top-level field of its JSON body set anew (the client's
        own encoding: json.dumps)."""
        body = json.loads(self.plain_body())
        body[name] = value
        return self.with_plain_body(json.dumps(body).encode())


class ExchangeRecorder:
    """An aiohttp TraceConfig that keeps the last exchange of each `<path> <status>` a
    session made, by the `group` set at the time (a load test's phase), and each user's last
    request in full of each path (what a digest request of theirs stands for)."""

    def __init__(self) -> None:
        self.group = ""
        self.samples: dict[str, dict[str, Recorded]] = {}
        self.full_requests: dict[tuple[str, str, str], Recorded] = {}
        self.trace = aiohttp.TraceConfig()
        self.trace.on_request_start.append(self._start)
        self.trace.on_request_chunk_sent.append(self._chunk)
        self.trace.on_request_end.append(self._end)

    async def _start(
        self, _: aiohttp.ClientSession, ctx: SimpleNamespace, __: aiohttp.TraceRequestStartParams
    ) -> None:
        ctx.body = bytearray()

    async def _chunk(
        self,
        _: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestChunkSentParams,
    ) -> None:
        ctx.body.extend(params.chunk)

    async def _end(
        self, _: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestEndParams
    ) -> None:
        info = params.response.request_info
        recorded = Recorded(
            info.method,
            str(info.url),
            [(k, v) for k, v in info.headers.items() if k.lower() not in NOT_REPLAYED],
            bytes(ctx.body),
            params.response.status,
        )
        self.samples.setdefault(self.group, {})[recorded.key] = recorded
        if recorded.body and not is_digest_request(recorded.plain_body()):
            self.full_requests[(self.group, recorded.path, recorded.user)] = recorded

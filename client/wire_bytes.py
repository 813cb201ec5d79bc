"""What one exchange costs on a mobile network behind a real gateway (docs/protocol.md: For app
developers, gzip behind a gateway): the bodies as sent and gzipped, and the header blocks.

The gateway is modelled as nginx with `gzip on; gzip_comp_level 6; gzip_min_length 20;` and
JSON among its `gzip_types`: an answer's body of 20 bytes or more crosses gzipped at level 6,
with a `Content-Encoding: gzip` line added to its headers; a shorter one crosses as it is.
The app gzips a request body at the same level when that makes the request smaller, its own
`Content-Encoding` line counted (a small part request is cheaper sent as it is): the reference
client does so from client.transport.GZIP_MIN_BYTES on, and is counted as it sent
(`WireBytes.as_sent`); the legacy client's requests are counted as that rule would send them.
A header block is counted as HTTP/1.1 text: the request or status line and every header line
as the sender wrote it, with the empty line that ends it; so a 204, which has no body, costs
its headers.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

GZIP_LEVEL = 6
GZIP_MIN_LENGTH = 20
# the line a gzipping gateway (or app) adds to the headers of a body it gzipped
CONTENT_ENCODING_LINE = len(b"Content-Encoding: gzip\r\n")
CRLF = 2
# what client.transport.ClientStats.wire counts: each a part of a message
KINDS = (
    "request_body",
    "request_body_gzip",
    "request_headers",
    "response_body",
    "response_body_gzip",
    "response_headers",
)


def gzipped_size(body: bytes) -> int:
    """The body's bytes as the gateway sends it: gzipped at GZIP_LEVEL from GZIP_MIN_LENGTH
    bytes on, as it is below."""
    if len(body) < GZIP_MIN_LENGTH:
        return len(body)
    return len(gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0))


def header_block_size(start_line: str, headers: Iterable[tuple[str | bytes, str | bytes]]) -> int:
    """An HTTP/1.1 header block's bytes: the start line (without its CRLF), `Name: value`
    lines, and the empty line after them."""
    size = len(start_line.encode("latin-1")) + CRLF
    for name, value in headers:
        size += len(name) + len(": ") + len(value) + CRLF
    return size + CRLF


@dataclass(frozen=True)
class WireBytes:
    """One message's bytes: its body as sent, its body through the gzipping gateway, and its
    header block (with the Content-Encoding line when the body was gzipped)."""

    body: int
    body_gzip: int
    headers: int

    @classmethod
    def as_sent(
        cls,
        start_line: str,
        headers: Iterable[tuple[str | bytes, str | bytes]],
        plain: bytes,
        sent: bytes,
    ) -> WireBytes:
        """A request as the client sent it: `sent` gzipped from `plain` (its headers say so),
        or `plain` itself; a gateway passes a request body on as it is."""
        return cls(len(plain), len(sent), header_block_size(start_line, headers))

    @classmethod
    def of(
        cls,
        start_line: str,
        headers: Iterable[tuple[str | bytes, str | bytes]],
        body: bytes,
        *,
        gzip_if_smaller: bool = False,
    ) -> WireBytes:
        """An answer (the gateway gzips from GZIP_MIN_LENGTH bytes on), or with
        `gzip_if_smaller` a request (the app gzips when the request is smaller for it)."""
        block = header_block_size(start_line, headers)
        gzipped = gzipped_size(body)
        if len(body) < GZIP_MIN_LENGTH:
            return cls(len(body), len(body), block)
        if gzip_if_smaller and gzipped + CONTENT_ENCODING_LINE >= len(body):
            return cls(len(body), len(body), block)
        return cls(len(body), gzipped, block + CONTENT_ENCODING_LINE)


def request_line(method: str, path_qs: str) -> str:
    return f"{method} {path_qs} HTTP/1.1"


def status_line(status: int, reason: str | None) -> str:
    return f"HTTP/1.1 {status} {reason or ''}".rstrip()


def wire_totals(wire: Mapping[str, int]) -> dict[str, int]:
    """A ClientStats.wire count with its sums: `raw` the bodies both ways as sent, `gzip`
    the same through the gzipping gateway, `gzip_headers` that with both header blocks."""
    count = {kind: wire.get(kind, 0) for kind in KINDS}
    gzipped = count["request_body_gzip"] + count["response_body_gzip"]
    return {
        **count,
        "raw": count["request_body"] + count["response_body"],
        "gzip": gzipped,
        "gzip_headers": gzipped + count["request_headers"] + count["response_headers"],
    }

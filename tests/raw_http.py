"""Requests written byte for byte on a socket: no client library cleans a header or a body
up first, so a test sends exactly the bad bytes it means."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from aiohttp.test_utils import TestClient


async def raw_post(
    client: TestClient, path: str, body: bytes, headers: Mapping[bytes, bytes]
) -> tuple[int, dict[bytes, bytes], bytes]:
    """POST `body` to `path`; the status, the headers (names lower case) and the body."""
    lines = [
        b"POST " + path.encode() + b" HTTP/1.1",
        b"Host: localhost",
        b"Content-Type: application/json",
        b"Connection: close",
        b"Content-Length: " + str(len(body)).encode(),
        *(name + b": " + value for name, value in headers.items()),
    ]
    head, payload = await exchange(
        client.server.host, client.server.port, b"\r\n".join(lines) + b"\r\n\r\n" + body
    )
    status_line, *header_lines = head.split(b"\r\n")
    answer_headers = {}
    for line in header_lines:
        name, _, value = line.partition(b":")
        answer_headers[name.strip().lower()] = value.strip()
    return int(status_line.split(b" ")[1]), answer_headers, payload


async def exchange(host: str, port: int, raw: bytes) -> tuple[bytes, bytes]:
    """Write `raw` on a new connection and read the answer until the server closes it: its
    head and its body."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(raw)
        # the server may answer (413) and close before it reads a big body whole
        with contextlib.suppress(ConnectionResetError):
            await writer.drain()
        async with asyncio.timeout(10):
            response = await reader.read()
    finally:
        writer.close()
    head, _, payload = response.partition(b"\r\n\r\n")
    return head, payload

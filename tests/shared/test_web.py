"""What aiohttp answers before any handler runs (SPEC: Identity and limits, bad input gets a
JSON error): a request it cannot parse gets the services' `{"code", "message"}` body on the
services' own runner, never plain text."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from shared.config import ServiceSettings
from shared.web import create_base_app
from tests import raw_http
from tests.apps import ServiceTestServer

UNPARSABLE = {
    "a malformed request line": b"GET /ping HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    "not HTTP at all": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    "a header without a colon": b"GET /ping HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    "a NUL in a header value": b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Yandex-UID: a\x00b\r\n\r\n",
    "Content-Length beside Transfer-Encoding": (
        b"POST /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "two Content-Lengths that differ": (
        b"POST /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
    ),
}


@pytest.fixture
async def server() -> AsyncIterator[ServiceTestServer]:
    server = ServiceTestServer(create_base_app("test", ServiceSettings(port=0)))
    await server.start_server()
    yield server
    await server.close()


async def exchange(server: ServiceTestServer, raw: bytes) -> tuple[int, bytes, bytes]:
    assert server.host is not None and server.port is not None
    head, body = await raw_http.exchange(server.host, server.port, raw)
    return int(head.split(b" ")[1]), head, body


@pytest.mark.parametrize("raw", list(UNPARSABLE), ids=list(UNPARSABLE))
async def test_a_request_aiohttp_cannot_parse_gets_a_json_400(
    server: ServiceTestServer, raw: str
) -> None:
    status, head, body = await exchange(server, UNPARSABLE[raw])
    assert status == 400, (status, body)
    assert b"application/json" in head.lower()
    error = json.loads(body)
    assert set(error) == {"code", "message"} and error["code"] == "bad_request", error
    assert error["message"]


async def test_a_well_formed_request_on_the_same_runner_is_served(
    server: ServiceTestServer,
) -> None:
    status, _, body = await exchange(
        server, b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 200 and json.loads(body) == {"status": "ok"}

"""What aiohttp answers before any handler runs (docs/protocol.md: Errors and limits; bad input
gets a JSON error): a request it cannot parse gets the services' `{"code", "message"}` body on the
services' own runner, never plain text."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator

import msgspec
import pytest
from aiohttp import web

from shared.config import ServiceSettings
from shared.errors import BadRequest, StartupError
from shared.web import (
    METRICS,
    checked_path,
    create_base_app,
    json_response,
    needs,
    read_json,
)
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


# --- slow clients (issue 13, part 8) -----------------------------------------------------------

READ_TIMEOUT_S = 0.3
KEEPALIVE_S = 0.5


class Echo(msgspec.Struct):
    value: int


_echo = msgspec.json.Decoder(Echo)


async def echo(request: web.Request) -> web.Response:
    return json_response(await read_json(request, _echo))


@pytest.fixture
async def limited() -> AsyncIterator[ServiceTestServer]:
    settings = ServiceSettings(
        port=0, request_read_timeout_s=READ_TIMEOUT_S, keepalive_timeout_s=KEEPALIVE_S
    )
    app = create_base_app("test", settings)
    app.router.add_post("/echo", echo)
    server = ServiceTestServer(app)
    await server.start_server()
    yield server
    await server.close()


async def open_connection(
    server: ServiceTestServer,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    assert server.host is not None and server.port is not None
    return await asyncio.open_connection(server.host, server.port)


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (bounded: a server that
    never closes fails the test)."""
    async with asyncio.timeout(5):
        return await reader.read()


def slow_requests(server: ServiceTestServer, missing: str) -> float:
    value = server.app[METRICS].registry.get_sample_value(
        "http_slow_requests_total", {"missing": missing}
    )
    return value or 0.0


async def test_headers_that_do_not_arrive_in_time_get_a_408_and_the_connection_closed(
    limited: ServiceTestServer,
) -> None:
    reader, writer = await open_connection(limited)
    started = time.monotonic()
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    answer = await read_until_closed(reader)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert json.loads(body)["code"] == "request_timeout"
    assert time.monotonic() - started < 5 * READ_TIMEOUT_S + 1
    assert slow_requests(limited, "headers") == 1


async def test_a_body_that_does_not_arrive_in_time_gets_a_408_and_the_connection_closed(
    limited: ServiceTestServer,
) -> None:
    reader, writer = await open_connection(limited)
    writer.write(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 12\r\n\r\n{"val'  # 5 of the 12 bytes
    )
    answer = await read_until_closed(reader)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert json.loads(body)["code"] == "request_timeout"
    assert slow_requests(limited, "body") == 1


async def test_many_slow_bodies_log_one_sparse_warning_and_no_traceback(
    limited: ServiceTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Each late body is counted, and its connection closed: a 408 from the handler's read,
    or, where the handler answered without reading it (a 405 here), the answer it had. The
    log says that it happens, not once per client: before, each one wrote an ERROR with a
    full traceback (800 slow bodies, 800 tracebacks)."""
    slow = 20

    async def one_slow_body(path: bytes) -> bytes:
        reader, writer = await open_connection(limited)
        writer.write(
            b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 12\r\n\r\n{"val'
        )
        answer = await read_until_closed(reader)
        writer.close()
        return answer

    caplog.set_level(logging.INFO)
    paths = [b"/echo"] * slow + [b"/ping"] * slow
    answers = await asyncio.gather(*(one_slow_body(path) for path in paths))
    assert [answer[:12] for answer in answers] == [b"HTTP/1.1 408"] * slow + [
        b"HTTP/1.1 405"
    ] * slow
    assert slow_requests(limited, "body") == 2 * slow
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.exc_info for r in warnings if r.exc_info] == []
    assert [r.levelname for r in warnings] == ["WARNING"]
    assert "read timeout" in warnings[0].getMessage()


async def test_a_request_that_arrived_in_time_is_not_cut_by_the_read_timeout(
    limited: ServiceTestServer,
) -> None:
    reader, writer = await open_connection(limited)
    request = (
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 11\r\n\r\n{"value":1}'
    )
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    assert json.loads(await reader.readexactly(length)) == {"value": 1}
    # past the read timeout (but within the keep-alive), the same connection still serves
    await asyncio.sleep(READ_TIMEOUT_S + 0.1)
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    writer.close()
    assert slow_requests(limited, "headers") == slow_requests(limited, "body") == 0


async def test_an_idle_keep_alive_connection_is_closed_after_the_keepalive_timeout(
    limited: ServiceTestServer,
) -> None:
    reader, writer = await open_connection(limited)
    writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    started = time.monotonic()
    answer = await read_until_closed(reader)  # the answer, then nothing until the close
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200")
    assert time.monotonic() - started + 0.05 >= KEEPALIVE_S


def test_a_resource_set_up_before_one_it_needs_stops_start_up_with_both_named():
    app = web.Application()
    needed = web.AppKey("tag_cache", int)
    with pytest.raises(StartupError, match=r"the engine needs .*tag_cache.*not set up before"):
        needs(app, needed, "the engine")
    app[needed] = 7
    assert needs(app, needed, "the engine") == 7


@pytest.mark.parametrize(
    "raw_path",
    [
        "/emulator/v1/features/../faults",
        "/emulator/v1/features/%2e%2e/faults",
        "/emulator/v1/features/%2E%2e/faults",
        "/emulator/v1/features/./faults",
        "/emulator/v1/features/%2E/faults",
        "/emulator/v1/features/x%2F..%2Ffaults",
        "/emulator/v1/features/x%2fy",
        "/mlutp/v1//orders/state",
        "/mlutp/v1/orders/state/",
    ],
)
def test_a_path_passed_on_whole_has_no_dot_empty_or_encoded_slash_segment(raw_path: str):
    with pytest.raises(BadRequest):
        checked_path(raw_path)


def test_a_path_passed_on_whole_is_the_path_it_names():
    assert checked_path("/mlutp/v1/orders/state") == "/mlutp/v1/orders/state"
    assert checked_path("/4.0/launch") == "/4.0/launch"
    # decoded once and quoted again: a double-encoded dot stays text, never a dot segment
    assert checked_path("/a/%252e%252e/b%20c") == "/a/%252e%252e/b%20c"
    assert checked_path("/a/..b/c.") == "/a/..b/c."

"""Request bodies gzipped (docs/protocol.md: Request bodies): a poll or a part request sent with
`Content-Encoding: gzip` is the same request as sent plain; the body limit counts the decoded
bytes (a gzip bomb is a 413 that stores nothing, and the rest of it is not inflated); a body
that does not decode is a JSON 400, a coding the services do not take a JSON 415 naming the
ones they do."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import zlib
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from tests import raw_http
from tests.apps import ServiceTestServer
from tests.emulator_api import create_order_id, stats
from tests.helpers import bff_kwargs, protocol_for_tests

STATE = "/mlutp/v1/orders/state"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def orders_state(
    aiohttp_client: Any, order_tags_server: TestServer, emulator_server: TestServer
) -> TestClient:
    """orders_state on the services' own runner: what aiohttp refuses as it parses the
    headers (a coding it knows and cannot decode) is answered as production answers it."""
    settings = OrdersStateSettings(
        **bff_kwargs(order_tags_server, emulator_server, protocol_for_tests())
    )
    client: TestClient = await aiohttp_client(ServiceTestServer(create_orders_state(settings)))
    return client


def part_path(client: TestClient) -> str:
    """A part endpoint of the policy (a totw-style body of `orders`), as the router lists it."""
    return next(
        route.resource.canonical
        for route in client.app.router.routes()
        if route.method == "POST"
        and route.resource is not None
        and route.resource.canonical not in (STATE, "/3.0/taxiontheway")
        and not route.resource.canonical.endswith("/route")
    )


async def post(
    client: TestClient, path: str, user: str, body: bytes, encoding: str | None = None
) -> tuple[int, Any]:
    headers = {**JSON, "X-Yandex-UID": user}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    async with client.post(path, data=body, headers=headers) as response:
        return response.status, await response.json()


async def test_a_gzip_poll_is_answered_as_the_same_poll_sent_plain(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique)
    first = json.dumps({"supported_services": ["taxi", "eats"]}).encode()
    status, answer = await post(orders_state, STATE, unique, first)
    assert status == 200 and [o["orderid"] for o in answer["orders"]] == [orderid]
    # the poll a client makes next: its order echoed with the tags and version it was given
    known = [{**o, "tags": {"fast_info": "not-a-tag"}} for o in answer["orders"]]
    poll = json.dumps({"known_orders": known, "supported_services": ["taxi", "eats"]}).encode()
    plain = await post(orders_state, STATE, unique, poll)
    gzipped = await post(orders_state, STATE, unique, gzip.compress(poll), "gzip")
    assert plain[0] == gzipped[0] == 200
    assert gzipped[1] == plain[1]
    assert "fast_info" in gzipped[1]["orders"][0]["need_request"]


async def test_a_gzip_part_request_is_answered_as_the_same_request_sent_plain(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique)
    path = part_path(orders_state)
    body = json.dumps({"orders": [{"orderid": orderid}], "format_currency": True}).encode()
    plain = await post(orders_state, path, unique, body)
    gzipped = await post(orders_state, path, unique, gzip.compress(body), "gzip")
    assert plain[0] == gzipped[0] == 200, (plain, gzipped)
    assert [p["orderid"] for p in gzipped[1]["orders"]] == [orderid]


async def test_a_gzip_bomb_past_the_body_limit_is_a_413_that_stores_nothing_and_ends_there(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    """64 KiB is the limit of the body as decoded: a small gzip body that inflates past it is
    refused, asks no source, writes nothing, and its connection is closed at once after the
    answer (lingering on it would inflate the rest of the bomb)."""
    orderid = await create_order_id(emulator, unique)
    keys_before = sorted(redis_sync.scan_iter("*"))
    calls_before = (await stats(emulator))["calls"]
    known = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": {}}
    inflated = json.dumps(
        {"known_orders": [{**known, "pad": " " * (8 << 20)}], "supported_services": ["taxi"]}
    ).encode()
    bomb = gzip.compress(inflated)
    assert len(bomb) < 64 * 1024 < len(inflated)
    assert orders_state.server.host is not None and orders_state.server.port is not None
    reader, writer = await asyncio.open_connection(
        orders_state.server.host, orders_state.server.port
    )
    try:
        # keep-alive: only the server's own choice closes this connection
        writer.write(
            f"POST {STATE} HTTP/1.1\r\nHost: localhost\r\nX-Yandex-UID: {unique}\r\n"
            f"Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(bomb)}\r\n\r\n".encode()
            + bomb
        )
        await writer.drain()
        async with asyncio.timeout(5):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            payload = await reader.readexactly(length)
            # the answer was the last thing on the connection: it ends here
            assert await reader.read() == b""
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413 ")
    assert json.loads(payload)["code"] == "payload_too_large"
    assert sorted(redis_sync.scan_iter("*")) == keys_before
    assert (await stats(emulator))["calls"] == calls_before


async def test_a_gzip_body_of_exactly_the_limit_is_served(orders_state: TestClient, unique: str):
    """The 413 above is the limit, not gzip: a body that inflates to the limit is read."""
    body = json.dumps({"supported_services": ["taxi"]}).encode()
    padded = body[:-1] + b" " * (64 * 1024 - len(body)) + b"}"
    assert len(padded) == 64 * 1024
    status, _ = await post(orders_state, STATE, unique, gzip.compress(padded), "gzip")
    assert status == 200


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("not gzip at all", b'{"supported_services": ["taxi"]}'),
        ("a gzip header and garbage", b"\x1f\x8b\x08\x00" + b"garbage" * 8),
        (
            "a bad deflate stream in a gzip member",
            gzip.compress(b'{"supported_services": ["taxi"]}')[:10] + b"\xff" * 30,
        ),
    ],
    ids=["not gzip", "garbage", "bad deflate"],
)
async def test_a_corrupt_gzip_body_is_a_json_400_and_nothing_logged_as_an_error(
    orders_state: TestClient,
    unique: str,
    name: str,
    body: bytes,
    caplog: pytest.LogCaptureFixture,
):
    with caplog.at_level(logging.ERROR):
        status, _, payload = await raw_http.raw_post(
            orders_state,
            STATE,
            body,
            {b"X-Yandex-UID": unique.encode(), b"Content-Encoding": b"gzip"},
        )
    assert status == 400, payload
    assert json.loads(payload)["code"] == "bad_encoding"
    # bad input, answered: no traceback for the operator to chase (aiohttp's lingering read
    # of the same body logged one)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        # codings aiohttp does not know: passed on undecoded, read as JSON they were taken
        ("compress", b'{"supported_services": ["taxi"]}'),
        ("x-gzip", gzip.compress(b'{"supported_services": ["taxi"]}')),
        ("gzip, gzip", gzip.compress(gzip.compress(b'{"supported_services": ["taxi"]}'))),
        # codings aiohttp knows and cannot decode without a library the services do not need
        ("br", b'{"supported_services": ["taxi"]}'),
        ("zstd", b'{"supported_services": ["taxi"]}'),
    ],
    ids=["compress", "x-gzip", "gzip twice", "br", "zstd"],
)
async def test_a_coding_the_services_do_not_take_is_a_json_415_naming_the_ones_they_do(
    orders_state: TestClient,
    unique: str,
    encoding: str,
    body: bytes,
    caplog: pytest.LogCaptureFixture,
):
    with caplog.at_level(logging.ERROR):
        status, headers, payload = await raw_http.raw_post(
            orders_state,
            STATE,
            body,
            {b"X-Yandex-UID": unique.encode(), b"Content-Encoding": encoding.encode()},
        )
    assert status == 415, payload
    error = json.loads(payload)
    assert error["code"] == "unsupported_encoding" and error["message"]
    assert headers[b"accept-encoding"] == b"gzip, deflate"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("identity", lambda body: body),
        ("GZIP", gzip.compress),
        ("deflate", zlib.compress),
    ],
    ids=["identity", "GZIP", "deflate"],
)
async def test_identity_and_the_codings_aiohttp_decodes_are_served(
    orders_state: TestClient, unique: str, encoding: str, encode: Any
):
    body = json.dumps({"supported_services": ["taxi"]}).encode()
    status, answer = await post(orders_state, STATE, unique, encode(body), encoding)
    assert status == 200, answer

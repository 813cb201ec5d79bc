"""How `mlutp loadtest` counts bytes (docs/protocol.md: For app developers, gzip behind a
gateway): as they cross a mobile network behind a gzipping gateway, bodies gzipped on both
sides, response headers included and a 204's headers too; the uncompressed figure beside."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from collections import Counter
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from client.transport import ClientStats, Replicas, Transport
from client.wire_bytes import (
    CONTENT_ENCODING_LINE,
    GZIP_LEVEL,
    WireBytes,
    gzipped_size,
    header_block_size,
    wire_totals,
)
from devtools.loadtest.config import PhaseResult
from devtools.loadtest.report import ratios, summary_table

ANSWER_TAG = "v1"
# a legacy-sized document: the same keys order after order, as a totw document repeats them
BIG_DOCUMENT = json.dumps(
    {
        "orders": [
            {
                "orderid": f"order-{n}",
                "status": "driving",
                "driver": {"name": "Ivan", "car": "Kia Rio", "plate": "A001AA77"},
                "route": [[37.6 + n / 1000, 55.7 + n / 1000] for _ in range(8)],
            }
            for n in range(30)
        ],
        "answer_tag": ANSWER_TAG,
    }
).encode()


async def _state(request: web.Request) -> web.Response:
    """orders/state's exchange: the answer with its answer_tag, or a 204 when the request
    names that tag."""
    sent = json.loads(await request.read())
    headers = {"X-Polling-Interval-Ms": "10000"}
    if sent.get("answer_tag") == ANSWER_TAG:
        return web.Response(status=204, headers=headers)
    return web.Response(body=BIG_DOCUMENT, content_type="application/json", headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/state", _state)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def _header_block_on_the_socket(url: str, body: bytes = b"{}") -> bytes:
    """The header block the server writes, read off a socket of our own."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"POST /state HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    block = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    await writer.wait_closed()
    return block


async def test_a_204_costs_its_headers_as_the_server_wrote_them(server: str) -> None:
    stats = ClientStats()
    async with aiohttp.ClientSession() as session:
        transport = Transport(session, user_id="u1", user_agent="app/1", timeout_s=5, stats=stats)
        await transport.post(Replicas(server), "/state", {}, revalidate="state")
        first = Counter(stats.wire)
        reply = await transport.post(Replicas(server), "/state", {}, revalidate="state")
    assert reply.status == 200  # the 204, handed to the caller as the answer it holds
    assert reply.body is not None and reply.body["answer_tag"] == ANSWER_TAG
    nothing_new = stats.wire - first
    assert nothing_new["response_body"] == 0
    assert nothing_new["response_body_gzip"] == 0
    sent = json.dumps({"answer_tag": ANSWER_TAG}).encode()
    written = await _header_block_on_the_socket(server, sent)
    assert written.startswith(b"HTTP/1.1 204 No Content\r\n")
    # the same header lines (the Date a second apart at most is as long)
    assert nothing_new["response_headers"] == len(written)
    assert stats.wire_by_exchange["/state 204"] > nothing_new["response_headers"]
    # the request's headers and body, the tag it holds in it, are counted too
    assert nothing_new["request_headers"] > len("POST /state HTTP/1.1\r\n\r\n")
    assert nothing_new["request_body"] == len(sent)


async def test_a_big_document_costs_less_gzipped_and_its_headers_say_so(server: str) -> None:
    stats = ClientStats()
    async with aiohttp.ClientSession() as session:
        transport = Transport(session, user_id="u1", user_agent="app/1", timeout_s=5, stats=stats)
        await transport.post(Replicas(server), "/state", {})
    totals = wire_totals(stats.wire)
    assert totals["response_body"] == len(BIG_DOCUMENT)
    assert totals["response_body_gzip"] == len(gzip.compress(BIG_DOCUMENT, GZIP_LEVEL, mtime=0))
    assert totals["gzip"] < totals["raw"] / 3
    written = await _header_block_on_the_socket(server)
    # the gateway that gzipped the body said so in a header line of its own
    assert totals["response_headers"] == len(written) + CONTENT_ENCODING_LINE
    assert totals["gzip_headers"] == (
        totals["gzip"] + totals["request_headers"] + totals["response_headers"]
    )


def test_the_app_gzips_a_request_body_only_when_the_request_is_smaller_for_it() -> None:
    small = b'{"orders": [{"orderid": "t-1"}]}'  # gzip's own 18 bytes outweigh its savings
    sent = WireBytes.of("POST /part HTTP/1.1", [], small, gzip_if_smaller=True)
    assert sent == WireBytes(len(small), len(small), header_block_size("POST /part HTTP/1.1", []))
    # the gateway gzips an answer of the same size all the same (gzip_min_length 20)
    answered = WireBytes.of("HTTP/1.1 200 OK", [], small)
    assert answered.body_gzip == gzipped_size(small) > len(small)
    big = WireBytes.of("POST /state HTTP/1.1", [], BIG_DOCUMENT, gzip_if_smaller=True)
    assert big.body_gzip == gzipped_size(BIG_DOCUMENT) < len(BIG_DOCUMENT)
    assert big.headers == header_block_size("POST /state HTTP/1.1", []) + CONTENT_ENCODING_LINE


def test_a_body_too_short_to_gzip_crosses_as_it_is() -> None:
    assert gzipped_size(b"{}") == 2
    short = WireBytes.of("HTTP/1.1 200 OK", [("Content-Length", "2")], b"{}")
    assert short == WireBytes(2, 2, header_block_size("HTTP/1.1 200 OK", [("Content-Length", "2")]))
    assert header_block_size("HTTP/1.1 200 OK", [("X-Mlutp-Wait", "news")]) == len(
        b"HTTP/1.1 200 OK\r\nX-Mlutp-Wait: news\r\n\r\n"
    )


def _phase(name: str, raw: float, gzipped: float, headers: float) -> PhaseResult:
    return PhaseResult(
        name=name,
        clients=1,
        seconds=60,
        active_order_minutes=1,
        heavy_calls=1,
        heavy_calls_per_order_minute=1,
        bytes_per_client_minute=raw,
        requests=1,
        errors=0,
        poll_latency_ms={"p50": 0, "p95": 0, "p99": 0},
        freshness_s={"p50": 0, "p95": 1, "p99": 1},
        changes_measured=1,
        changes_unseen=0,
        wire_bytes_per_client_minute={
            "raw": raw,
            "gzip": gzipped,
            "request_headers": headers / 2,
            "response_headers": headers / 2,
            "gzip_headers": gzipped + headers,
        },
    )


def test_the_report_prints_new_over_legacy_raw_gzip_and_gzip_with_headers() -> None:
    phases = {
        "legacy": _phase("legacy", raw=40_000, gzipped=8_000, headers=2_000),
        "mlutp": _phase("mlutp", raw=4_000, gzipped=1_000, headers=1_000),
    }
    ratio = ratios(phases)
    assert ratio["raw_bytes_per_client_minute"] == 0.1
    assert ratio["gzip_bytes_per_client_minute"] == 0.125
    assert ratio["gzip_headers_bytes_per_client_minute"] == 0.2
    table = summary_table(phases, ratio)
    assert re.search(
        r"new / legacy gzip_headers_bytes_per_client_minute +0\.200 +\(goal <= 0\.2\)", table
    )
    assert "new / legacy raw_bytes_per_client_minute" in table
    assert f"gzip gateway (level {GZIP_LEVEL}" in table

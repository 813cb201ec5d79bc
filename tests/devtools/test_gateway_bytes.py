"""Bytes through a real HTTP/2 gateway (docs/protocol.md: For app developers, gzip behind a
gateway; benchmarks/gateway_bytes.py): Debian's nginx with h2c and gzip in front of
orders_state, the new scheme and legacy through the same listeners, TCP payload counted both
ways with every header. Skipped, saying so, without nginx or h2load (.ci/run installs them)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from devtools.exchange_recording import ExchangeRecorder, Recorded
from devtools.gateway import (
    missing_tools,
    negotiated_h2,
    replay,
    running_gateway,
)
from devtools.stack import STACK, Stack
from tests.stack_api import UID, emulator_post, stack_env, stack_settings

USER = "gateway-user"
POLL = "/mlutp/v1/orders/state"
HEADERS = {UID: USER, "User-Agent": "ru.yandex.taxi/5.0 (iPhone; iOS 17.4)"}

needs_gateway = pytest.mark.skipif(
    bool(missing_tools()),
    reason=f"Debian's {' and '.join(missing_tools())} not installed (.ci/run installs it): "
    "no gateway to measure through",
)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    services = [s for s in STACK if s.name in ("order_tags", "emulator", "orders_state")]
    stack = Stack(stack_env(EMULATOR_DRIVER_ENABLED="false"), services, settings=stack_settings())
    try:
        await stack.start()
        yield stack
    finally:
        await stack.close()


async def recorded_exchanges(stack: Stack) -> dict[str, Recorded]:
    """A user's poll answered 200, the same poll with its answer_tag answered 204, and a
    legacy totw of the user's order, as a client sent them."""
    recorder = ExchangeRecorder()
    state = stack.url("orders_state")
    async with aiohttp.ClientSession(trace_configs=[recorder.trace]) as session:
        created = await emulator_post(
            session, stack, "/emulator/v1/orders", {"user_id": USER, "service": "taxi"}
        )
        body = {"known_orders": [], "wait_ms": 0}
        async with session.post(f"{state}{POLL}", json=body, headers=HEADERS) as response:
            assert response.status == 200, await response.text()
            tag = (await response.json())["answer_tag"]
        async with session.post(
            f"{state}{POLL}", json={**body, "answer_tag": tag}, headers=HEADERS
        ) as response:
            assert response.status == 204, await response.text()
        async with session.post(
            f"{state}/3.0/taxiontheway", json={"orderid": created["orderid"]}, headers=HEADERS
        ) as response:
            assert response.status == 200, await response.text()
    return recorder.samples[""]


@needs_gateway
async def test_h2_and_http11_through_nginx_count_both_ways_with_headers(stack: Stack):
    samples = await recorded_exchanges(stack)
    state = stack.url("orders_state")
    async with running_gateway({POLL: state, "/3.0/taxiontheway": state}) as gateway:
        nothing_new = samples[f"{POLL} 204"]
        h2 = await replay(gateway, nothing_new, http2=True, more=2)
        h1 = await replay(gateway, nothing_new, http2=False, more=2)
        totw = samples["/3.0/taxiontheway 200"]
        totw_h1 = await replay(gateway, totw, http2=False, more=1)

    # every replay was answered as the client was
    assert set(h2.statuses) == set(h1.statuses) == {204}
    assert set(totw_h1.statuses) == {200}
    # the h2 listener spoke HTTP/2 (h2c with prior knowledge), the other HTTP/1.1
    assert negotiated_h2(h2), (h2.first_up, h2.first_down)
    assert not negotiated_h2(h1)
    assert h1.first_down.startswith(b"HTTP/1.1 204")

    # both ways: the request's body and headers up, a 204's headers down (it has no body)
    status_line = len(b"HTTP/1.1 204 No Content\r\n\r\n")
    request_line = len(f"POST {POLL} HTTP/1.1\r\n\r\n".encode())
    assert h1.exchange.up >= len(nothing_new.body) + request_line + len(USER)
    assert h1.exchange.down > status_line
    assert h2.exchange.up > len(nothing_new.body)
    assert h2.exchange.down > 0
    # HPACK: headers a connection sent before cost an index on the next exchange
    assert h2.exchange.up < h2.first.up
    assert h2.exchange.up < h1.exchange.up

    # the gateway gzips answers: totw's document crosses smaller than it is
    async with (
        aiohttp.ClientSession() as session,
        session.post(totw.url, data=totw.body, headers=dict(totw.headers)) as response,
    ):
        document = len(await response.read())
    assert totw_h1.exchange.down < document / 2


def test_a_replayed_timeout_keeps_the_clients_bytes():
    recorded = Recorded(
        "POST", f"http://127.0.0.1:1{POLL}", [], b'{"known_orders": [], "wait_ms": 25000}', 204
    )
    replayed = recorded.with_wait_ms(1000)
    assert len(replayed.body) == len(recorded.body)
    assert replayed.body == b'{"known_orders": [], "wait_ms":  1000}'

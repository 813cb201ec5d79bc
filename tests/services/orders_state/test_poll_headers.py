"""What every poll's answer carries in its headers, each of them paid on every poll of a mobile
client, a 204's too (docs/protocol.md: Polling interval, For app developers): the interval,
the wait cause of a waiting poll, the content type and length, the request id an
operator finds the request by, and the Date HTTP asks of an origin server; no Server header."""

from __future__ import annotations

import aiohttp
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient, TestServer

from tests.emulator_api import create_order_id

POLL = {"supported_services": ["taxi"]}


def names(response: ClientResponse) -> list[str]:
    return sorted(name.decode() for name, _ in response.raw_headers)


async def test_a_poll_answer_carries_only_the_headers_a_client_or_an_operator_reads(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    user = {"X-Yandex-UID": unique}
    answered = await orders_state.post("/mlutp/v1/orders/state", json=POLL, headers=user)
    assert answered.status == 200
    assert names(answered) == [
        # one user's data: no shared cache may keep it
        "Cache-Control",
        "Content-Length",
        "Content-Type",
        "Date",
        "X-Request-Id",
        "X-Yataxi-Polling-Interval-Ms",
    ]
    held = (await answered.json())["answer_tag"]
    again = await orders_state.post(
        "/mlutp/v1/orders/state", json={**POLL, "answer_tag": held}, headers=user
    )
    assert again.status == 204
    # a 204 costs its headers alone: the interval (never cached); no ETag, no body, and so
    # no Content-Type nor Content-Length (RFC 9110 §8.6: a 204 sends no Content-Length)
    assert names(again) == [
        "Cache-Control",
        "Date",
        "X-Request-Id",
        "X-Yataxi-Polling-Interval-Ms",
    ]
    waited = await orders_state.post(
        "/mlutp/v1/orders/state", json={**POLL, "wait_ms": 1}, headers=user
    )
    assert "X-Mlutp-Wait" in names(waited)


async def test_no_service_names_its_server_software(
    orders_state: TestClient,
    launch: TestClient,
    order_tags_server: TestServer,
    emulator: TestClient,
    unique: str,
):
    async with (
        aiohttp.ClientSession() as session,
        session.get(order_tags_server.make_url("/ping")) as tags,
    ):
        assert "Server" not in tags.headers
    for client, path in (
        (orders_state, "/ping"),
        (launch, "/ping"),
        (emulator, "/ping"),
        (orders_state, "/no/such/path"),
    ):
        response = await client.get(path)
        assert "Server" not in response.headers, (path, response.headers)
    launched = await launch.post("/4.0/launch", json=POLL, headers={"X-Yandex-UID": unique})
    assert launched.status == 200 and "Server" not in launched.headers

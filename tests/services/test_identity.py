"""Identity is exactly what was checked (docs/protocol.md: Identity): an X-Yandex-UID that is
not 1–128 printable ASCII characters without spaces is a 401 with a JSON error on every
client-facing endpoint, and an accepted one reaches the upstreams byte for byte."""

from __future__ import annotations

import json

import pytest
from aiohttp.test_utils import TestClient
from multidict import CIMultiDict

from tests import raw_http
from tests.emulator_api import create_order_id, stats

POLL_TAXI = b'{"supported_services": ["taxi"]}'
BAD_IDS = {
    "bytes that are not UTF-8": b"victim\xff\xfe",
    "a control character": b"vic\x01tim",
    "a space inside": b"vic tim",
    "129 characters": b"v" * 129,
    "empty": b"",
}
ENDPOINTS = {
    "orders_state": [
        ("/mlutp/v1/orders/state", b"{}"),
        ("/mlutp/v1/taxi/fast_info", b'{"orders": [{"orderid": "o1"}]}'),
        ("/mlutp/v1/taxi/route", b'{"orderid": "o1"}'),
        ("/3.0/taxiontheway", b'{"orderid": "o1"}'),
    ],
    "launch": [("/4.0/launch", b'{"supported_services": ["taxi"]}')],
}


async def raw_post(client: TestClient, path: str, body: bytes, uid: bytes) -> tuple[int, bytes]:
    status, _, payload = await raw_http.raw_post(client, path, body, {b"X-Yandex-UID": uid})
    return status, payload


@pytest.mark.parametrize("uid", list(BAD_IDS), ids=list(BAD_IDS))
async def test_a_malformed_user_id_is_a_401_with_a_json_error_everywhere(
    orders_state: TestClient, launch: TestClient, emulator: TestClient, uid: str
):
    calls_before = (await stats(emulator))["calls"]
    clients = {"orders_state": orders_state, "launch": launch}
    for service, endpoints in ENDPOINTS.items():
        for path, body in endpoints:
            status, payload = await raw_post(clients[service], path, body, BAD_IDS[uid])
            if status == 400 and payload.startswith(b"Invalid header value char"):
                continue  # refused by aiohttp's HTTP parser, before any handler runs
            assert status == 401, (path, status, payload)
            assert json.loads(payload)["code"] == "unauthorized"
    assert (await stats(emulator))["calls"] == calls_before  # no upstream was asked


async def test_the_accepted_id_is_forwarded_byte_for_byte(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    uid = f"{unique}!#$%&'*+-.^_`|~" + "x" * (128 - len(unique) - 15)
    assert len(uid) == 128
    orderid = await create_order_id(emulator, uid)
    status, payload = await raw_post(
        orders_state, "/mlutp/v1/orders/state", POLL_TAXI, uid.encode("ascii")
    )
    assert status == 200, payload
    assert [o["orderid"] for o in json.loads(payload)["orders"]] == [orderid]
    recent = (await stats(emulator))["recent"]["source:taxi"][-1]
    assert recent["headers"]["X-Yandex-UID"] == uid


@pytest.mark.parametrize("padded", [b" ", b"\t", b"  \t"])
async def test_whitespace_around_the_header_is_not_part_of_the_id(
    orders_state: TestClient, emulator: TestClient, unique: str, padded: bytes
):
    """HTTP drops whitespace around a field value (RFC 9110, OWS) before the service sees
    it: the id checked and the id forwarded are both the bare one."""
    orderid = await create_order_id(emulator, unique)
    raw = padded + unique.encode() + padded
    status, payload = await raw_post(orders_state, "/mlutp/v1/orders/state", POLL_TAXI, raw)
    assert status == 200, payload
    assert [o["orderid"] for o in json.loads(payload)["orders"]] == [orderid]
    assert (await stats(emulator))["recent"]["source:taxi"][-1]["headers"]["X-Yandex-UID"] == unique


async def test_two_user_ids_are_a_401_whichever_comes_first(
    orders_state: TestClient, launch: TestClient, emulator: TestClient, unique: str
):
    """A gateway that appends X-Yandex-UID instead of replacing it must not let a client
    choose the identity by sending its own first."""
    await create_order_id(emulator, unique)
    calls_before = (await stats(emulator))["calls"]
    two = CIMultiDict([("X-Yandex-UID", f"{unique}-victim"), ("X-Yandex-UID", unique)])
    clients = {"orders_state": orders_state, "launch": launch}
    for service, endpoints in ENDPOINTS.items():
        for path, body in endpoints:
            resp = await clients[service].post(path, data=body, headers=two)
            assert resp.status == 401, path
            assert (await resp.json())["code"] == "unauthorized"
    assert (await stats(emulator))["calls"] == calls_before  # no upstream was asked

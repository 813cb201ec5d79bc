"""Bad input: a clear JSON error (400/401/413), never a 500, and nothing stored changes."""

from __future__ import annotations

import json

import pytest
import redis
from aiohttp.test_utils import TestClient

from shared.redis import tags_key
from tests.emulator_api import create_order_id

PATHS = ["/mlutp/v1/orders/state", "/4.0/launch"]


def order(i: int = 0, **extra: object) -> dict:
    return {"orderid": f"o{i}", "service": "taxi", "status": "driving", "tags": {}, **extra}


BAD = [
    ("malformed JSON", b'{"known_orders": [', "malformed_json"),
    ("not an object", b"[1, 2]", "invalid_request"),
    ("empty body", b"", "bad_request"),
    ("known_orders of wrong type", {"known_orders": {"a": 1}}, "invalid_request"),
    ("orderid missing", {"known_orders": [{"service": "taxi"}]}, "invalid_request"),
    (
        "orderid of wrong type",
        {"known_orders": [{"orderid": 5, "service": "taxi"}]},
        "invalid_request",
    ),
    ("force of wrong type", {"known_orders": [order(force="yes")]}, "invalid_request"),
    ("more than 20 orders", {"known_orders": [order(i) for i in range(21)]}, "too_many_orders"),
    (
        "orderid over 128",
        {"known_orders": [{"orderid": "x" * 129, "service": "taxi"}]},
        "invalid_request",
    ),
    ("tag over 256", {"known_orders": [order(tags={"fast_info": "t" * 257})]}, "invalid_request"),
    (
        "17 extra fields",
        {"known_orders": [order(**{f"f{i}": i for i in range(17)})]},
        "too_many_fields",
    ),
    ("extras over 2 KiB", {"known_orders": [order(blob="x" * 2100)]}, "fields_too_large"),
    ("a duplicate order", {"known_orders": [order(1), order(1)]}, "bad_request"),
]


def body_bytes(body: object) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("name", "body", "code"), BAD, ids=[b[0] for b in BAD])
async def test_bad_input_is_a_400_with_a_json_error(
    orders_state: TestClient,
    launch: TestClient,
    path: str,
    name: str,
    body: object,
    code: str,
    redis_sync: redis.Redis,
):
    client = orders_state if path.startswith("/mlutp") else launch
    payload = body_bytes(body)
    if path == "/4.0/launch" and isinstance(body, dict) and "supported_services" not in body:
        payload = body_bytes({**body, "supported_services": ["taxi"]})
    keys_before = sorted(redis_sync.scan_iter("tags:*"))
    headers = {"X-Yandex-UID": "u", "Content-Type": "application/json"}
    resp = await client.post(path, data=payload, headers=headers)
    assert resp.status == 400, await resp.text()
    error = await resp.json()
    assert error["code"] == code and error["message"]
    assert sorted(redis_sync.scan_iter("tags:*")) == keys_before


@pytest.mark.parametrize("path", PATHS)
async def test_no_user_is_401(orders_state: TestClient, launch: TestClient, path: str):
    client = orders_state if path.startswith("/mlutp") else launch
    for headers in ({}, {"X-Yandex-UID": ""}):
        resp = await client.post(path, json={"supported_services": ["taxi"]}, headers=headers)
        assert resp.status == 401
        assert (await resp.json())["code"] == "unauthorized"


@pytest.mark.parametrize("path", PATHS)
async def test_a_body_over_64_kib_is_413(orders_state: TestClient, launch: TestClient, path: str):
    client = orders_state if path.startswith("/mlutp") else launch
    body = {"supported_services": ["taxi"], "known_orders": [order(pad="x" * 70_000)]}
    resp = await client.post(path, json=body, headers={"X-Yandex-UID": "u"})
    assert resp.status == 413
    assert (await resp.json())["code"] == "payload_too_large"


async def test_bad_input_never_creates_tags(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    redis_sync.delete(tags_key("taxi", orderid))
    resp = await orders_state.post(
        "/mlutp/v1/orders/state",
        json={"known_orders": [order(1), order(1)], "supported_services": ["taxi"]},
        headers={"X-Yandex-UID": unique},
    )
    assert resp.status == 400
    assert not redis_sync.exists(tags_key("taxi", orderid))

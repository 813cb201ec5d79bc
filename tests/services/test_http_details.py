"""Plain HTTP details of the client-facing services (docs/protocol.md: Identity; Errors and
limits): every answer says `Cache-Control: no-store` (one user's data, no shared cache may keep
it), every 401 carries a challenge naming the gateway's user header, and a body that is not
`application/json` is a 415 that asks nothing upstream and stores nothing."""

from __future__ import annotations

import json

import pytest
import redis
from aiohttp.test_utils import TestClient
from multidict import CIMultiDict

from tests import raw_http
from tests.emulator_api import create_order, create_order_id, stats

USER_CHALLENGE = 'X-Yandex-UID realm="mlutp"'
LEGACY = "/3.0/taxiontheway"


def post_routes(client: TestClient) -> list[str]:
    """Every POST route the app serves, as its router lists it: a route added later is
    checked without this test naming it."""
    return sorted(
        route.resource.canonical
        for route in client.app.router.routes()
        if route.method == "POST" and route.resource is not None
    )


def a_body(path: str, orderid: str = "o1") -> dict[str, object]:
    """A well-formed body for each kind of route."""
    if path == "/4.0/launch" or path == "/mlutp/v1/orders/state":
        return {"supported_services": ["taxi"]}
    if path == LEGACY or path.endswith("/route"):
        return {"orderid": orderid}
    return {"orders": [{"orderid": orderid}]}


async def typed_post(
    client: TestClient, path: str, body: bytes, content_type: bytes | None, user: bytes = b"u"
) -> tuple[int, dict[bytes, bytes], bytes]:
    """POST with exactly this Content-Type line, or none (a client library adds one)."""
    lines = [
        b"POST " + path.encode() + b" HTTP/1.1",
        b"Host: localhost",
        b"Connection: close",
        b"X-Yandex-UID: " + user,
        b"Content-Length: " + str(len(body)).encode(),
    ]
    if content_type is not None:
        lines.append(b"Content-Type: " + content_type)
    assert client.server.host is not None and client.server.port is not None
    head, payload = await raw_http.exchange(
        client.server.host, client.server.port, b"\r\n".join(lines) + b"\r\n\r\n" + body
    )
    status_line, *header_lines = head.split(b"\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split(b" ")[1]), headers, payload


# --- Cache-Control: no-store ------------------------------------------------------------------


async def test_every_answer_of_the_client_facing_services_says_no_store(
    orders_state: TestClient, launch: TestClient, emulator: TestClient, unique: str
):
    """Answers of every kind, on every route: served (200, 204), refused (401, 415), bad
    (400), no such route (404, 405), and /ping and /metrics."""
    order = await create_order(emulator, unique)
    orderid = order["orderid"]
    user = {"X-Yandex-UID": unique}
    seen: set[tuple[str, int]] = set()
    for client in (orders_state, launch):
        routes = post_routes(client)
        assert routes, "the app serves no POST route"
        for path in routes:
            answers = [
                await client.post(path, json=a_body(path, orderid), headers=user),
                await client.post(path, json=a_body(path, orderid)),
                await client.post(path, data=b"{}", headers={**user, "Content-Type": "text/x"}),
                await client.post(path, json=[1], headers=user),
                await client.get(path, headers=user),
            ]
            for resp in answers:
                assert resp.headers.getall("Cache-Control") == ["no-store"], (path, resp.status)
                seen.add((path, resp.status))
        for path in ("/ping", "/metrics", "/no/such/route"):
            resp = await client.get(path)
            assert resp.headers.getall("Cache-Control") == ["no-store"], path
            seen.add((path, resp.status))
    # nothing new: a 204, with no body, and no cache keeps that either
    poll = {"supported_services": ["taxi"]}
    first = await orders_state.post("/mlutp/v1/orders/state", json=poll, headers=user)
    answer_tag = (await first.json())["answer_tag"]
    resp = await orders_state.post(
        "/mlutp/v1/orders/state", json={**poll, "answer_tag": answer_tag}, headers=user
    )
    assert resp.status == 204
    assert resp.headers.getall("Cache-Control") == ["no-store"]
    # each kind of answer was among those checked, the served ones with their data
    for served in ("/4.0/launch", "/mlutp/v1/orders/state", "/mlutp/v1/taxi/fast_info", LEGACY):
        assert (served, 200) in seen, served
    assert {status for _, status in seen} >= {200, 400, 401, 404, 405, 415}


# --- WWW-Authenticate ----------------------------------------------------------------------


async def test_every_401_of_a_client_facing_route_names_the_gateway_header(
    orders_state: TestClient, launch: TestClient
):
    """RFC 9110 §11.6.1: a 401 carries a challenge. No user, a malformed one, two of them."""
    refused = [
        {},
        {"X-Yandex-UID": ""},
        {"X-Yandex-UID": "a b"},
        CIMultiDict([("X-Yandex-UID", "a"), ("X-Yandex-UID", "b")]),
    ]
    for client in (orders_state, launch):
        for path in post_routes(client):
            for headers in refused:
                resp = await client.post(path, json=a_body(path), headers=headers)
                assert resp.status == 401, (path, headers)
                assert (await resp.json())["code"] == "unauthorized"
                assert resp.headers.getall("WWW-Authenticate") == [USER_CHALLENGE], path


async def test_a_401_of_the_emulators_user_endpoints_names_the_header_too(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique)
    resp = await emulator.post(LEGACY, json={"orderid": order["orderid"]})
    assert resp.status == 401
    assert resp.headers.getall("WWW-Authenticate") == [USER_CHALLENGE]


# --- 415 -------------------------------------------------------------------------------------

NOT_JSON = {
    "text/plain": b"text/plain",
    "no Content-Type": None,
    "form data (curl -d)": b"application/x-www-form-urlencoded",
    "octet-stream": b"application/octet-stream",
    "a +json type": b"application/merge-patch+json",
    "JSON in another charset": b"application/json; charset=iso-8859-1",
}
JSON_TYPES = {
    "plain": b"application/json",
    "with charset": b"application/json; charset=utf-8",
    "in other cases, quoted": b'Application/JSON;Charset="UTF-8"',
}


@pytest.mark.parametrize("content_type", list(NOT_JSON), ids=list(NOT_JSON))
async def test_a_body_that_is_not_json_is_a_415_that_asks_and_stores_nothing(
    orders_state: TestClient,
    launch: TestClient,
    emulator: TestClient,
    unique: str,
    redis_sync: redis.Redis,
    content_type: str,
):
    """Every client-facing route that reads a JSON body; the body itself is good JSON that
    would be served (a forced known order, which would otherwise be fetched and stored)."""
    orderid = await create_order_id(emulator, unique)
    calls_before = (await stats(emulator))["calls"]
    # the keys the user's and the order's data would be kept under
    mine = f"*{unique}*"
    keys_before = sorted(redis_sync.scan_iter(mine))
    known = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": {}, "force": 1}
    checked = 0
    for client in (orders_state, launch):
        for path in post_routes(client):
            if path == LEGACY:
                continue  # passed through as it came: the legacy upstream judges its body
            body = {**a_body(path, orderid), "known_orders": [known]}
            status, headers, payload = await typed_post(
                client, path, json.dumps(body).encode(), NOT_JSON[content_type], unique.encode()
            )
            assert status == 415, (path, status, payload)
            assert headers[b"content-type"].startswith(b"application/json")
            error = json.loads(payload)
            assert (
                error["code"] == "unsupported_media_type"
                and "application/json" in (error["message"])
            )
            checked += 1
    assert checked >= 4
    assert (await stats(emulator))["calls"] == calls_before  # no upstream was asked
    assert sorted(redis_sync.scan_iter(mine)) == keys_before


@pytest.mark.parametrize("content_type", list(JSON_TYPES), ids=list(JSON_TYPES))
async def test_application_json_with_or_without_its_charset_is_served(
    orders_state: TestClient, emulator: TestClient, unique: str, content_type: str
):
    orderid = await create_order_id(emulator, unique)
    body = json.dumps({"supported_services": ["taxi"]}).encode()
    status, _, payload = await typed_post(
        orders_state, "/mlutp/v1/orders/state", body, JSON_TYPES[content_type], unique.encode()
    )
    assert status == 200, payload
    assert [o["orderid"] for o in json.loads(payload)["orders"]] == [orderid]


async def test_the_identity_is_checked_before_the_body_type(orders_state: TestClient):
    """A caller without a user learns nothing more than its 401."""
    status, headers, _ = await typed_post(
        orders_state, "/mlutp/v1/orders/state", b"{}", b"text/plain", b""
    )
    assert status == 401
    assert headers[b"www-authenticate"] == USER_CHALLENGE.encode()


async def test_an_empty_body_is_judged_as_a_body_not_as_a_type(orders_state: TestClient):
    """No body has no media type: an empty one is the 400 it always was."""
    status, _, payload = await typed_post(orders_state, "/mlutp/v1/orders/state", b"", None)
    assert status == 400, payload
    assert json.loads(payload)["code"] == "bad_request"

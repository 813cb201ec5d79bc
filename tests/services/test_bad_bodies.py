"""Bad input never causes a 500 (SPEC: Identity and limits): invalid UTF-8 inside a JSON
string and JSON nested a thousand levels deep get a 400 with the JSON error body on every
POST endpoint of every service, the internal ones included."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.conftest import TEST_TOKEN

BAD_BODIES = {
    "invalid UTF-8 in a string": b'{"orders": [{"orderid": "\xff\xfe"}], "x": "\xc3\x28"}',
    "nested 1000 levels": b'{"orders": ' + b"[" * 1000 + b"]" * 1000 + b"}",
    "an object nested 1000 levels": b'{"a": ' + b'{"a": ' * 999 + b"1" + b"}" * 1000,
}
HEADERS = {"X-Yandex-UID": "bad-body-user", "Authorization": f"Bearer {TEST_TOKEN}"}
SAMPLE = {"service": "taxi", "orderid": "o1", "feature": "comment"}


def post_paths(client: TestClient) -> list[str]:
    paths = []
    for route in client.app.router.routes():
        if route.method == "POST" and route.resource is not None:
            paths.append(re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m[1]], route.resource.canonical))
    return paths


@pytest.fixture
async def every_service(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    order_tags_server: TestServer,
    emulator: TestClient,
    orders_state: TestClient,
    launch: TestClient,
) -> dict[str, TestClient]:
    """The four services wired to each other, as in production."""
    return {
        "order_tags": await aiohttp_client(order_tags_server),
        "emulator": emulator,
        "orders_state": orders_state,
        "launch": launch,
    }


@pytest.mark.parametrize("body", list(BAD_BODIES), ids=list(BAD_BODIES))
async def test_a_bad_body_never_causes_a_5xx_and_errors_are_json_everywhere(
    every_service: dict[str, TestClient], body: str
):
    checked = 0
    for name, client in every_service.items():
        for path in post_paths(client):
            resp = await client.post(path, data=BAD_BODIES[body], headers=HEADERS)
            answer = await resp.json()
            assert resp.status < 500, (name, path, resp.status, answer)
            if resp.status >= 400:
                assert set(answer) == {"code", "message"}, (name, path)
            checked += 1
    assert checked >= 20  # every POST route of the four services

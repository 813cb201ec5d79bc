"""The conformance kit's recording pass-through keeps a client under test to the paths it names:
a dot segment (plain or percent-encoded) or an encoded slash, which would carry a "feature"
call on to the emulator's control API (faults, the driver, orders for any user), is a JSON 400
that reaches nothing and records nothing; a user change as the contract names it passes; a
digest request is recorded as the body it stands for."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from devtools.conformance.checks import digests_stand_for_previous
from devtools.conformance.recording import POLL_PATH, Recorder, create_app, digest_of
from emulator.keys import DRIVER, FAULTS, WORLD
from tests.emulator_api import create_order
from tests.raw_http import raw_post

NOWHERE = "http://127.0.0.1:1"
FAULT = {"target": "totw", "mode": "error500"}
DRIVER_ON = {"enabled": True}
SOMEONE_ELSE = "someone-else"
ORDER = {"user_id": SOMEONE_ELSE, "service": "taxi"}


@pytest.fixture
def recorder(emulator_server: TestServer) -> Recorder:
    emulator_url = str(emulator_server.make_url("")).rstrip("/")
    return Recorder(launch_url=NOWHERE, orders_state_url=NOWHERE, emulator_url=emulator_url)


@pytest.fixture
async def kit(
    aiohttp_client: Callable[..., Awaitable[TestClient]], recorder: Recorder
) -> TestClient:
    return await aiohttp_client(create_app(recorder))


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/emulator/v1/features/../faults", FAULT),
        ("/emulator/v1/features/%2e%2e/faults", FAULT),
        ("/emulator/v1/features/%2E%2E%2Ffaults", FAULT),
        ("/emulator/v1/features/taxi/o1%2F..%2F..%2F..%2Ffaults", FAULT),
        ("/emulator/v1/features/./../driver", DRIVER_ON),
        ("/emulator/v1/features/../../v1/orders", ORDER),
        ("/emulator/v1/features/taxi/%2e%2e/%2e%2e/orders", ORDER),
    ],
)
async def test_a_path_that_would_leave_the_features_is_a_json_400_and_reaches_nothing(
    kit: TestClient,
    recorder: Recorder,
    emulator_server: TestServer,
    path: str,
    body: dict[str, Any],
) -> None:
    # written on the socket as it is: a client library would resolve the dots itself
    status, headers, answer = await raw_post(
        kit, path, json.dumps(body).encode(), {b"X-Yandex-UID": b"client-under-test"}
    )
    assert status == 400, answer
    assert headers[b"content-type"].startswith(b"application/json")
    error = json.loads(answer)
    assert error["code"] == "bad_request" and error["message"]
    emulator = emulator_server.app
    assert emulator[FAULTS].snapshot() == {}
    assert not emulator[DRIVER].enabled
    assert emulator[WORLD].active(SOMEONE_ELSE, "taxi") == []
    assert recorder.exchanges == []


async def test_a_user_change_passes_and_is_recorded_as_a_feature_call(
    kit: TestClient, recorder: Recorder, emulator: TestClient, unique: str
) -> None:
    order = await create_order(emulator, unique, status="driving")
    path = f"/emulator/v1/features/taxi/{order['orderid']}/comment"
    body = {"version": order["version"], "value": "at the gate"}
    changed = await kit.post(path, json=body, headers={"X-Yandex-UID": unique})
    assert changed.status == 200, await changed.text()
    [exchange] = recorder.exchanges
    assert exchange.kind == "feature" and exchange.path == path and exchange.status == 200


async def test_a_digest_request_is_recorded_as_the_full_body_it_stands_for(
    kit: TestClient, recorder: Recorder, unique: str
) -> None:
    """docs/protocol.md: The digest request. The kit checks a digest request as the body it
    stands for, the client's previous full one; a digest of any other body is a violation."""
    full = json.dumps({"known_orders": [], "answer_tag": "abc", "wait_ms": 2000}).encode()
    headers = {"X-Yandex-UID": unique, "Content-Type": "application/json"}
    for body in (
        full,
        json.dumps({"request_digest": digest_of(full)}).encode(),
        json.dumps({"request_digest": digest_of(full + b" ")}).encode(),
    ):
        await kit.post(POLL_PATH, data=body, headers=headers)
    sent, repeated, other = recorder.exchanges
    assert repeated.request == sent.request == json.loads(full)
    assert repeated.digest == digest_of(full) and repeated.digest_stood_for
    assert not other.digest_stood_for
    [problem] = digests_stand_for_previous(recorder.exchanges)
    assert other.digest is not None and other.digest in problem

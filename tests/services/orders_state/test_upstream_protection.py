"""A failing upstream is protected from clients that retry on every poll (issue 13, part 4):
its circuit opens after failures in a row (calls are then answered stale without being
made), one probe at a time closes it again, and retries stay within the retry budget."""

from __future__ import annotations

import time

import pytest
from aiohttp.test_utils import TestClient

from tests.emulator_api import ORDER_CORE, calls, create_order_id, set_fault
from tests.helpers import MakeApp

FAST = "/mlutp/v1/taxi/fast_info"
FAILURES_TO_OPEN = 10
OPEN_S = 0.5


@pytest.fixture
async def protected(make_orders_state: MakeApp) -> TestClient:
    return await make_orders_state(
        protocol={
            "upstream_circuit_failures": FAILURES_TO_OPEN,
            "upstream_circuit_open_s": OPEN_S,
            "retry_budget_ratio": 0.2,
            "retry_budget_min": 3,
            # every request of one order reaches the upstream: no recent fetch answers a repeat
            "part_fetches": {"recent_memo_bytes": 0},
        }
    )


async def fetch_fast(client: TestClient, user: str, orderid: str) -> dict:
    resp = await client.post(
        FAST, json={"orders": [{"orderid": orderid}]}, headers={"X-Yandex-UID": user}
    )
    assert resp.status == 200, await resp.text()
    [part] = (await resp.json())["orders"]
    return dict(part)


async def test_a_client_retrying_every_poll_cannot_multiply_load_on_a_failing_totw(
    protected: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    await set_fault(emulator, ORDER_CORE, "error500")
    before = await calls(emulator, ORDER_CORE)
    started = time.monotonic()
    requests = 100
    for _ in range(requests):
        part = await fetch_fast(protected, unique, orderid)
        assert part["error"] == {"update_status": "stale"}
    elapsed = time.monotonic() - started
    made = await calls(emulator, ORDER_CORE) - before
    # unprotected: a call and its retry per request, 200. Protected: the failures that open
    # the circuit, their retries within the budget's floor, then one probe per open period
    probes = int(elapsed / OPEN_S) + 1
    assert made <= FAILURES_TO_OPEN + 3 + 2 * probes, (made, elapsed)
    assert made < requests

    # the upstream is back: after the open period one probe goes through and closes it
    await set_fault(emulator, ORDER_CORE, "ok")
    deadline = time.monotonic() + 10 * OPEN_S
    while "error" in (part := await fetch_fast(protected, unique, orderid)):
        assert time.monotonic() < deadline, "the circuit never closed"
    assert part["status"] == "driving"
    # closed: every request reaches the upstream again
    before = await calls(emulator, ORDER_CORE)
    for _ in range(5):
        assert "error" not in await fetch_fast(protected, unique, orderid)
    assert await calls(emulator, ORDER_CORE) - before == 5


async def test_retries_stay_within_the_budget_while_the_circuit_is_closed(
    make_orders_state: MakeApp, emulator: TestClient, unique: str
):
    # a circuit that never opens here, to see the budget alone
    client = await make_orders_state(
        protocol={
            "upstream_circuit_failures": 10_000,
            "retry_budget_ratio": 0.2,
            "retry_budget_min": 3,
            "part_fetches": {"recent_memo_bytes": 0},
        }
    )
    orderid = await create_order_id(emulator, unique, status="driving")
    await set_fault(emulator, ORDER_CORE, "error500")
    before = await calls(emulator, ORDER_CORE)
    requests = 50
    for _ in range(requests):
        assert "error" in await fetch_fast(client, unique, orderid)
    made = await calls(emulator, ORDER_CORE) - before
    # every request would retry once (100 calls); the budget allows 20 % of the calls
    assert made <= requests + max(3, 0.2 * requests) + 1, made
    assert made > requests  # the budget's share of retries did go out


async def test_a_failure_is_remembered_like_a_success_for_the_min_ttl(
    make_orders_state: MakeApp, emulator: TestClient, unique: str
):
    """A new order whose part's upstream is down: the client asks for the part again on every
    poll. The part's failed call answers it for the min TTL, as a successful one would: a
    failing upstream gets fewer calls, not more."""
    client = await make_orders_state()
    orderid = await create_order_id(emulator, unique, status="driving")
    await set_fault(emulator, ORDER_CORE, "error500")
    before = await calls(emulator, ORDER_CORE)
    for _ in range(3):
        resp = await client.post(
            FAST, json={"orders": [{"orderid": orderid}]}, headers={"X-Yandex-UID": unique}
        )
        [answered] = (await resp.json())["orders"]
        assert answered["error"] == {"update_status": "stale"}
    # one call and its one retry, for the three requests
    assert await calls(emulator, ORDER_CORE) - before == 2

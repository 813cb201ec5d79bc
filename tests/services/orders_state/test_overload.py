"""Force is a privilege, not a lever (docs/protocol.md: Tags and need_request, rule 5:
honoured a bounded number of times per order per minute, beyond that treated as absent), and
admission control (docs/protocol.md: Polling interval; past the cap of polls in progress, a
poll is answered at once with 503 and Retry-After), the cap following the process's own
queue."""

from __future__ import annotations

import asyncio
import time

import redis
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from services.bff.resources import ADMISSION
from tests.emulator_api import change, create_order_id, set_fault
from tests.helpers import MakeApp, all_tags, poll, poll_one

FORCE_BUDGET = 2


async def poll_taxi(orders_state: TestClient, user: str) -> ClientResponse:
    """One poll of the user's taxi orders, its answer as it came (a 503 included)."""
    return await orders_state.post(
        "/mlutp/v1/orders/state",
        json={"supported_services": ["taxi"]},
        headers={"X-Yandex-UID": user},
    )


async def test_force_beyond_the_orders_budget_is_treated_as_absent(
    make_orders_state: MakeApp,
    emulator: TestClient,
    unique: str,
    redis_sync: redis.Redis,
):
    orders_state = await make_orders_state(protocol=dict(force_per_order_per_minute=FORCE_BUDGET))
    orderid = await create_order_id(emulator, unique)
    fresh = all_tags(redis_sync, orderid)  # younger than the min TTL
    await change(emulator, "taxi", orderid, {"tips": {"value": 10}})
    needs = [
        (await poll_one(orders_state, unique, orderid, fresh, force=True))["orders"][0][
            "need_request"
        ]
        for _ in range(FORCE_BUDGET + 2)
    ]
    changed = ["fast_info", "rarely_changed"]
    assert needs == [changed] * FORCE_BUDGET + [[]] * 2
    # another order of the same user has a budget of its own
    other = await create_order_id(emulator, unique)
    other_fresh = all_tags(redis_sync, other)
    await change(emulator, "taxi", other, {"tips": {"value": 20}})
    body = await poll_one(orders_state, unique, other, other_fresh, force=True)
    [answered] = [o for o in body["orders"] if o["orderid"] == other]
    assert answered["need_request"] == changed
    metrics = await (await orders_state.get("/metrics")).text()
    assert 'mlutp_force_total{outcome="over_budget"} 2.0' in metrics
    assert 'mlutp_force_total{outcome="honoured"} 3.0' in metrics


async def test_past_the_cap_of_polls_in_progress_a_poll_is_a_503_with_retry_after_at_once(
    make_orders_state: MakeApp,
    emulator: TestClient,
    unique: str,
    upstream_received: dict[str, asyncio.Event],
):
    orders_state = await make_orders_state(
        protocol=dict(max_polls_in_flight=1, overload_in_flight=1, source_deadline_s=5.0)
    )
    await create_order_id(emulator, unique)
    # the taxi source holds its answer: the first poll stays in progress until it answers
    await set_fault(emulator, "source:taxi", "slow", delay_ms=1500)
    first = asyncio.create_task(poll(orders_state, unique, {"supported_services": ["taxi"]}))
    await asyncio.wait_for(upstream_received["source:taxi"].wait(), 10)

    started = time.monotonic()
    resp = await poll_taxi(orders_state, unique)
    shed_in_s = time.monotonic() - started
    assert resp.status == 503
    assert (await resp.json())["code"] == "overloaded"
    assert int(resp.headers["Retry-After"]) in (2, 3, 4)
    assert not first.done(), "the 503 came at once, not after the poll in progress"
    assert shed_in_s < 1.0
    status, body, _ = await first
    assert status == 200 and body["orders"], "the admitted poll is answered in full"
    await set_fault(emulator, "source:taxi", "ok")
    # once the poll in progress is done, polls are admitted again
    status, _, _ = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    assert status == 200
    metrics = await (await orders_state.get("/metrics")).text()
    assert "mlutp_polls_shed_total 1.0" in metrics


async def test_the_cap_follows_the_event_loops_lag_down_to_its_floor_and_back_up(
    make_orders_state: MakeApp,
    emulator: TestClient,
    unique: str,
    upstream_received: dict[str, asyncio.Event],
):
    orders_state = await make_orders_state(
        protocol=dict(
            min_polls_in_flight=3,
            max_polls_in_flight=50,
            admission_sample_s=0.01,
            source_deadline_s=5.0,
        )
    )
    admission = orders_state.server.app[ADMISSION]
    await create_order_id(emulator, unique)
    await set_fault(emulator, "source:taxi", "slow", delay_ms=1500)
    # polls in progress (held by the slow source) reach the floor while the loop is on time
    held = [
        asyncio.create_task(poll(orders_state, unique, {"supported_services": ["taxi"]}))
        for _ in range(3)
    ]
    await asyncio.wait_for(upstream_received["source:taxi"].wait(), 10)
    grown_by = time.monotonic() + 5
    # the cap moves on the lag watcher's samples, which no event marks
    while admission.limit.cap <= 3 and time.monotonic() < grown_by:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert admission.limit.cap > 3, "a cap reached with the loop on time grows"

    # the process queues its own work: every timer fires late, the cap falls to the floor
    for _ in range(30):
        time.sleep(0.03)  # noqa: ASYNC251 (the loop itself busy: the lag the cap follows)
        await asyncio.sleep(0)
    assert admission.limit.cap == 3
    resp = await poll_taxi(orders_state, unique)
    assert resp.status == 503
    assert (await resp.json())["code"] == "overloaded"
    metrics = await (await orders_state.get("/metrics")).text()
    assert "mlutp_admission_limit 3.0" in metrics
    assert "mlutp_event_loop_lag_seconds_bucket" in metrics
    for task in held:
        status, body, _ = await task
        assert status == 200 and body["orders"], "polls admitted before are answered in full"

"""Force is a privilege, not a lever (docs/protocol.md: Tags and need_request, rule 5:
honoured a bounded number of times per order per minute, beyond that treated as absent), and
admission control (docs/protocol.md: Polling interval; past the cap of polls in progress, a
poll is answered at once with 503 and Retry-After), the cap following the process's own
queue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import redis
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient, TestServer

from services.bff.resources import ADMISSION
from shared.config import RedisSettings
from shared.redis import tags_key
from tests.emulator_api import change, create_order_id, set_fault
from tests.helpers import MakeApp, all_tags, poll, poll_one, replicas_on

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


async def test_another_user_naming_an_order_with_force_spends_nothing_of_its_owners_budget(
    make_orders_state: MakeApp,
    emulator: TestClient,
    unique: str,
    redis_sync: redis.Redis,
):
    orders_state = await make_orders_state(protocol=dict(force_per_order_per_minute=FORCE_BUDGET))
    orderid = await create_order_id(emulator, unique)
    fresh = all_tags(redis_sync, orderid)  # younger than the min TTL
    await change(emulator, "taxi", orderid, {"tips": {"value": 10}})
    for _ in range(FORCE_BUDGET + 2):
        # the order is not this user's: it is left out, and its owner's budget untouched
        body = await poll_one(orders_state, f"{unique}-other", orderid, fresh, force=True)
        assert body["orders"] == []
    body = await poll_one(orders_state, unique, orderid, fresh, force=True)
    assert body["orders"][0]["need_request"] == ["fast_info", "rarely_changed"]


async def test_tags_that_lost_their_owner_are_named_again_by_a_poll_and_its_force_counts(
    make_orders_state: MakeApp,
    emulator: TestClient,
    unique: str,
    redis_sync: redis.Redis,
):
    """order_tags counts a force only on an order whose tags name the forcing user its owner.
    Tags a feature's bump made again after a flush name none: the next poll whose source
    lists the order for the user names it (a create that writes no part), and the owner's
    force counts again."""
    orders_state = await make_orders_state(protocol=dict(force_per_order_per_minute=FORCE_BUDGET))
    orderid = await create_order_id(emulator, unique)
    fresh = all_tags(redis_sync, orderid)  # younger than the min TTL
    await change(emulator, "taxi", orderid, {"tips": {"value": 10}})
    redis_sync.hdel(tags_key("taxi", orderid), "_owner")  # every part there, no owner
    body = await poll_one(orders_state, unique, orderid, fresh, force=True)
    assert body["orders"][0]["need_request"] == []  # whose force it is could not be told
    assert redis_sync.hget(tags_key("taxi", orderid), "_owner") == unique
    body = await poll_one(orders_state, unique, orderid, fresh, force=True)
    assert body["orders"][0]["need_request"] == ["fast_info", "rarely_changed"]


async def test_past_the_cap_of_polls_in_progress_a_poll_is_a_503_with_retry_after_at_once(
    make_orders_state: MakeApp,
    emulator: TestClient,
    unique: str,
    upstream_received: dict[str, asyncio.Event],
):
    orders_state = await make_orders_state(
        protocol=dict(
            max_polls_in_flight=1,
            admission={"overload_in_flight": 1},
            source_deadline_s=5.0,
        )
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


async def test_the_force_budget_is_one_for_all_replicas(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    redis_settings: RedisSettings,
    unique: str,
    redis_sync: redis.Redis,
):
    # before: each process had its own budget, so two replicas honoured it twice as often
    emulator, replicas = await replicas_on(
        aiohttp_client,
        aiohttp_server,
        redis_settings,
        2,
        protocol=dict(force_per_order_per_minute=FORCE_BUDGET),
    )
    orderid = await create_order_id(emulator, unique)
    fresh = all_tags(redis_sync, orderid)  # younger than the min TTL
    await change(emulator, "taxi", orderid, {"tips": {"value": 10}})
    needs = [
        (await poll_one(replicas[i % 2], unique, orderid, fresh, force=True))["orders"][0][
            "need_request"
        ]
        for i in range(2 * FORCE_BUDGET)
    ]
    changed = ["fast_info", "rarely_changed"]
    assert needs == [changed] * FORCE_BUDGET + [[]] * FORCE_BUDGET


async def test_an_idle_process_admits_a_burst_it_clears_in_its_budget_none_shed_or_degraded(
    make_orders_state: MakeApp, emulator: TestClient, unique: str
):
    # before: the cap started at its floor (20) and 52-80 of 100 such polls were 503s
    orders_state = await make_orders_state()
    await create_order_id(emulator, unique)
    answers = await asyncio.gather(*(poll_taxi(orders_state, unique) for _ in range(100)))
    assert [resp.status for resp in answers] == [200] * 100
    for resp in answers:
        body = await resp.json()
        assert body["orders"] and body["orders"][0]["update_status"] == "actual"


async def test_looks_that_cost_the_process_more_cpu_lower_the_cap(
    make_orders_state: MakeApp, emulator: TestClient, unique: str
):
    orders_state = await make_orders_state(
        protocol=dict(admission={"min_polls_in_flight": 3, "window_s": 0.5})
    )
    admission = orders_state.server.app[ADMISSION]
    await create_order_id(emulator, unique)
    # a fresh process admits what its starting estimate (0.5 ms a look) clears in 250 ms
    assert admission.limit.cap == 500
    # every look now costs the process 10 ms more CPU (this test shares its process)
    # bounded, not a sleep: at least 20 looks must be measured, and a machine busy with the
    # rest of the suite makes each a slow one (CI-like runs saw 10 s pass first)
    busy_until = time.monotonic() + 30
    while admission.limit.look_cost_ms < 5 and time.monotonic() < busy_until:
        resp = await poll_taxi(orders_state, unique)
        assert resp.status == 200
        burn_until = time.process_time() + 0.01
        while time.process_time() < burn_until:
            pass
    assert admission.limit.look_cost_ms >= 5
    assert admission.limit.cap <= 50
    metrics = await (await orders_state.get("/metrics")).text()
    # the lag sampler may move the cap a step while /metrics is served: the gauge is read as
    # a value, and what it must show is the lowered cap, not one exact step of it
    exported = [
        float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("mlutp_admission_limit ")
    ]
    assert len(exported) == 1 and exported[0] <= 50
    assert "mlutp_event_loop_lag_seconds_bucket" in metrics


async def test_a_busy_window_in_which_no_look_finished_is_not_taken_for_idle_work(
    make_orders_state: MakeApp, emulator: TestClient, unique: str
):
    # before: such a window's CPU was charged to the process's idle work, and the looks after
    # it were costed at a fraction of their CPU (the cap admitted ~3x what it cleared)
    orders_state = await make_orders_state(protocol=dict(admission={"window_s": 0.05}))
    admission = orders_state.server.app[ADMISSION]
    await create_order_id(emulator, unique)
    await set_fault(emulator, "source:taxi", "slow", delay_ms=5000)
    try:
        held = asyncio.create_task(poll_taxi(orders_state, unique))
        # the process busy for 0.3 s (windows on end) while that one look waits on its source
        burnt, deadline = 0.0, time.monotonic() + 5
        while burnt < 0.3 and time.monotonic() < deadline:
            if admission.in_flight:
                burn_until = time.process_time() + 0.005
                while time.process_time() < burn_until:
                    pass
                burnt += 0.005
            await asyncio.sleep(0)
        assert burnt >= 0.3
        assert admission.in_flight == 1, "the look ended before the windows were measured"
        assert admission.limit.idle_cpu_share < 0.2
        assert (await held).status == 200
    finally:
        await set_fault(emulator, "source:taxi", "ok")

"""The control API: lifecycles, feature changes with tags on the right parts, faults, driver."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
import redis
from aiohttp.test_utils import TestClient

from emulator.driver import Driver
from emulator.keys import DRIVER, FEATURES
from shared.redis import tags_key
from tests.emulator_api import create_order, set_fault, stats
from tests.helpers import stored_parts

# of every version the policy serves: the deprecated layout's `main` too
NON_STATIC_TAXI_PARTS = {"fast_info", "rarely_changed", "chat", "slow", "main"}


async def source_orders(emulator: TestClient, user: str, service: str = "taxi") -> list[dict]:
    resp = await emulator.post(
        f"/sources/{service}/v1/orders/active", json={}, headers={"X-Yandex-UID": user}
    )
    return list((await resp.json())["orders"])


@pytest.mark.parametrize(
    ("service", "lifecycle"),
    [
        ("taxi", ["searching", "driving", "waiting", "transporting", "complete"]),
        ("eats", ["created", "cooking", "delivering", "delivered"]),
        ("grocery", ["created", "assembling", "delivering", "delivered"]),
    ],
)
async def test_lifecycle_and_finished_orders_leave_the_list(
    emulator: TestClient, unique: str, service: str, lifecycle: list[str]
):
    order = await create_order(emulator, unique, service)
    assert order["status"] == lifecycle[0]
    for status in lifecycle[1:]:
        resp = await emulator.post(f"/emulator/v1/orders/{service}/{order['orderid']}/advance")
        assert (await resp.json())["status"] == status
        listed = await source_orders(emulator, unique, service)
        if status == lifecycle[-1] and service != "taxi":
            assert listed == []
        else:
            assert [o["status"] for o in listed] == [status]
    resp = await emulator.post(f"/emulator/v1/orders/{service}/{order['orderid']}/advance")
    assert resp.status == 400
    if service == "taxi":
        # a finished trip awaits the user's rating, listed until then
        resp = await emulator.post(
            f"/emulator/v1/features/taxi/{order['orderid']}/feedback",
            json={"rating": 5},
            headers={"X-Yandex-UID": unique},
        )
        assert resp.status == 200, await resp.text()
        assert await source_orders(emulator, unique, service) == []


async def test_a_new_order_gets_tags_for_its_non_static_parts(
    emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    order = await create_order(emulator, unique)
    tags = stored_parts(redis_sync, tags_key("taxi", order["orderid"]))
    assert set(tags) == NON_STATIC_TAXI_PARTS
    assert set(tags.values()) == {f"v{order['version']}"}


async def test_a_change_sets_tags_of_exactly_the_parts_holding_the_fields(
    emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    order = await create_order(emulator, unique)
    key = tags_key("taxi", order["orderid"])
    before = redis_sync.hgetall(key)
    resp = await emulator.post(
        f"/emulator/v1/orders/taxi/{order['orderid']}/change", json={"fields": {"comment": "hi"}}
    )
    changed = await resp.json()
    assert changed["version"] == order["version"] + 1
    # the comment lives in rarely_changed; `version` (the order_proc version) in fast_info;
    # both in the deprecated layout's main, which an old client still reads
    assert set(changed["tags"]) == {"rarely_changed", "fast_info", "main"}
    after = redis_sync.hgetall(key)
    assert after["rarely_changed"] == after["fast_info"] == f"v{changed['version']}"
    assert after["chat"] == before["chat"] and after["slow"] == before["slow"]
    # data first, tag second: the data behind the new tag is already there
    doc = await (
        await emulator.post("/3.0/taxiontheway", json=order, headers={"X-Yandex-UID": unique})
    ).json()
    assert doc["comment"] == "hi" and doc["version"] == changed["version"]


async def test_eats_changes_bump_unique_tags(
    emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    order = await create_order(emulator, unique, "eats")
    key = tags_key("eats", order["orderid"])
    first = redis_sync.hget(key, "full_info")
    await emulator.post(f"/emulator/v1/orders/eats/{order['orderid']}/advance")
    second = redis_sync.hget(key, "full_info")
    assert first and second and first != second


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/emulator/v1/orders", {"user_id": "u", "service": "boats"}),
        ("/emulator/v1/orders", {"user_id": "u", "service": "taxi", "status": "flying"}),
        ("/emulator/v1/orders", {"service": "taxi"}),
        ("/emulator/v1/orders", "not an object"),
        ("/emulator/v1/faults", {"target": "nowhere", "mode": "down"}),
        ("/emulator/v1/faults", {"target": "totw", "mode": "sideways"}),
        ("/emulator/v1/faults", {"target": "totw", "mode": "slow", "delay_ms": -1}),
        ("/emulator/v1/driver", {"enabled": "yes"}),
    ],
)
async def test_bad_control_input_is_400(emulator: TestClient, path: str, body: object):
    resp = await emulator.post(path, json=body)
    assert resp.status == 400
    assert set(await resp.json()) == {"code", "message"}


async def test_bad_change_is_400_and_changes_nothing(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique)
    path = f"/emulator/v1/orders/taxi/{order['orderid']}/change"
    for body in ({"fields": {"no_such_field": 1}}, {"fields": {"version": 99}}, {"fields": {}}):
        assert (await emulator.post(path, json=body)).status == 400
    resp = await emulator.post(
        path, data=b"{bad json", headers={"Content-Type": "application/json"}
    )
    assert resp.status == 400
    doc = await (
        await emulator.post("/3.0/taxiontheway", json=order, headers={"X-Yandex-UID": unique})
    ).json()
    assert doc["version"] == order["version"]
    resp = await emulator.post(
        "/emulator/v1/orders/taxi/nope/change", json={"fields": {"comment": "x"}}
    )
    assert resp.status == 404


async def test_fault_error500_and_recovery(emulator: TestClient, unique: str):
    await set_fault(emulator, "source:taxi", "error500")
    resp = await emulator.post(
        "/sources/taxi/v1/orders/active", json={}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 500
    await set_fault(emulator, "source:taxi", "ok")
    resp = await emulator.post(
        "/sources/taxi/v1/orders/active", json={}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 200


async def test_fault_down_drops_the_connection(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique)
    await set_fault(emulator, "totw", "down")
    with pytest.raises(aiohttp.ClientConnectionError):
        await emulator.post("/3.0/taxiontheway", json=order, headers={"X-Yandex-UID": unique})
    # other targets are untouched
    resp = await emulator.post(
        "/sources/taxi/v1/orders/active", json={}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 200


async def test_fault_slow_delays_the_answer(emulator: TestClient, unique: str):
    await set_fault(emulator, "source:eats", "slow", delay_ms=300)
    started = time.monotonic()
    resp = await emulator.post(
        "/sources/eats/v1/orders/active", json={}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 200
    assert time.monotonic() - started >= 0.3


async def test_faulted_calls_are_counted(emulator: TestClient, unique: str):
    await set_fault(emulator, "source:grocery", "error500")
    before = (await stats(emulator))["calls"].get("source:grocery", 0)
    await emulator.post(
        "/sources/grocery/v1/orders/active", json={}, headers={"X-Yandex-UID": unique}
    )
    assert (await stats(emulator))["calls"]["source:grocery"] == before + 1


async def test_driver_moves_orders_through_their_lifecycle(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique)
    resp = await emulator.post("/emulator/v1/driver", json={"enabled": True})
    assert (await resp.json()) == {"enabled": True}
    app = emulator.server.app
    driver = Driver(app[FEATURES], app[DRIVER].profile.model_copy(update={"time_scale": 1e6}))
    await driver.step()  # first sight of the order: its status clock starts
    await asyncio.sleep(0.01)
    await driver.step()
    listed = await source_orders(emulator, unique)
    assert listed == [] or listed[0]["status"] != "searching"
    changes = await (await emulator.get("/emulator/v1/changes")).json()
    assert any(c["orderid"] == order["orderid"] and c["version"] > 1 for c in changes["changes"])
    await emulator.post("/emulator/v1/driver", json={"enabled": False})
    assert app[DRIVER].enabled is False


async def test_the_first_population_is_spread_over_the_lifecycle(emulator: TestClient):
    app = emulator.server.app
    profile = app[DRIVER].profile.model_copy(update={"population": 40})
    driver = Driver(app[FEATURES], profile)
    await driver.step()
    statuses = [o.status for o in app[FEATURES].world.all_active()]
    assert len(statuses) == 40
    # started at once, yet not in step: a run measures a steady mix, not one status at a time
    assert len(set(statuses)) >= 3


async def test_stats_per_user_count_only_that_users_calls_and_bytes(
    emulator: TestClient, unique: str
):
    """The demo page's traffic panel: what one user's app made the upstreams do."""
    mine = await create_order(emulator, unique, status="driving")
    theirs = await create_order(emulator, f"{unique}-other", status="driving")
    received = {unique: 0, f"{unique}-other": 0}
    for user, order, times in ((unique, mine, 2), (f"{unique}-other", theirs, 3)):
        for _ in range(times):
            resp = await emulator.post(
                "/3.0/taxiontheway",
                json={"orderid": order["orderid"]},
                headers={"X-Yandex-UID": user},
            )
            assert resp.status == 200
            received[user] += len(await resp.read())
    resp = await emulator.get("/emulator/v1/stats", params={"user_id": unique})
    assert resp.status == 200
    body = await resp.json()
    assert body["user_id"] == unique
    assert body["calls"] == {"totw": 2}
    assert body["bytes_sent"] == {"totw": received[unique]}
    nobody = await (await emulator.get("/emulator/v1/stats", params={"user_id": "nobody"})).json()
    assert nobody["calls"] == {} and nobody["bytes_sent"] == {}
    bad = await emulator.get("/emulator/v1/stats", params={"user_id": "has space"})
    assert bad.status == 400 and (await bad.json())["code"]

"""POST /4.0/launch: orders and allowed_changes as in orders/state, plus the polling policy
of the supported services only."""

from __future__ import annotations

import redis
from aiohttp.test_utils import TestClient

from tests.emulator_api import create_order_id
from tests.services.conftest import POLICY, poll
from tests.services.orders_state.test_poll import all_tags


async def test_launch_without_known_orders_lists_orders_and_the_policy(
    launch: TestClient, emulator: TestClient, unique: str
):
    taxi_id = await create_order_id(emulator, unique, "taxi", status="searching")
    eats_id = await create_order_id(emulator, unique, "eats")
    status, body, interval = await poll(
        launch, unique, {"supported_services": ["taxi", "eats"]}, "/4.0/launch"
    )
    assert status == 200
    state = body["mlutp_orders_state"]
    assert [o["orderid"] for o in state["orders"]] == [taxi_id, eats_id]
    assert state["orders"][0]["need_request"] == [
        "fast_info",
        "rarely_changed",
        "static",
        "chat",
        "slow",
    ]
    assert state["orders"][1]["need_request"] == ["full_info"]
    assert state["allowed_changes"] == [
        {"service": "taxi", "can_make_more_orders": True},
        {"service": "eats", "can_make_more_orders": True},
    ]
    assert interval == 2000  # taxi searching
    rules = state["polling_policy"]
    assert {r["service"] for r in rules} == {"taxi", "eats"}
    taxi_rules = [r for r in rules if r["service"] == "taxi"]
    assert [r["part_name"] for r in taxi_rules] == [
        "fast_info",
        "rarely_changed",
        "static",
        "chat",
        "slow",
        "route",
    ]
    route = taxi_rules[-1]
    assert route["polling_type"] == "route_distance_depended" and route["part_type"] == "taxiroute"
    fast = taxi_rules[0]
    assert fast["required"] is True and fast["fields"] == list(
        POLICY.services["taxi"].rules[0].fields
    )
    assert taxi_rules[2]["static"] is True


async def test_the_policy_is_given_only_for_the_supported_services(
    launch: TestClient, emulator: TestClient, unique: str
):
    eats_id = await create_order_id(emulator, unique, "eats")
    _, body, _ = await poll(
        launch,
        unique,
        {
            "supported_services": ["taxi"],
            "known_orders": [
                {"orderid": eats_id, "service": "eats", "status": "created", "tags": {}}
            ],
        },
        "/4.0/launch",
    )
    state = body["mlutp_orders_state"]
    assert {r["service"] for r in state["polling_policy"]} == {"taxi"}
    assert [o["orderid"] for o in state["orders"]] == [eats_id]


async def test_launch_with_known_orders_uses_their_tags(
    launch: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    tags = all_tags(redis_sync, orderid, age_ms=60_000)
    del tags["static"]
    _, body, _ = await poll(
        launch,
        unique,
        {
            "supported_services": ["taxi"],
            "known_orders": [
                {"orderid": orderid, "service": "taxi", "status": "searching", "tags": tags}
            ],
        },
        "/4.0/launch",
    )
    [order] = body["mlutp_orders_state"]["orders"]
    assert order["need_request"] == ["static"]
    assert order["tags"] == tags


async def test_supported_services_is_required(launch: TestClient):
    resp = await launch.post("/4.0/launch", json={}, headers={"X-Yandex-UID": "u"})
    assert resp.status == 400

"""POST /4.0/launch: orders and allowed_changes as in orders/state, plus the polling policy
of the supported services only."""

from __future__ import annotations

import redis
from aiohttp.test_utils import TestClient

from tests.emulator_api import ORDER_CORE, create_order_id, set_fault, stats, totw
from tests.helpers import POLICY, all_tags, poll


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


async def test_launch_queries_only_the_supported_services_and_gives_their_policy(
    launch: TestClient, emulator: TestClient, unique: str
):
    eats_id = await create_order_id(emulator, unique, "eats")
    eats_calls = (await stats(emulator))["calls"].get("source:eats", 0)
    status, body, _ = await poll(
        launch,
        unique,
        {
            "supported_services": ["taxi", "scooters"],  # scooters: not served here
            "known_orders": [
                {"orderid": eats_id, "service": "eats", "status": "created", "tags": {}}
            ],
        },
        "/4.0/launch",
    )
    assert status == 200
    state = body["mlutp_orders_state"]
    assert {r["service"] for r in state["polling_policy"]} == {"taxi"}
    assert state["orders"] == []  # a known order of a service not supported is ignored
    assert state["allowed_changes"] == [
        {"service": "taxi", "can_make_more_orders": True},
        {
            "service": "scooters",
            "can_make_more_orders": False,
            "no_more_orders_reason": "service_unavailable",
        },
    ]
    assert (await stats(emulator))["calls"].get("source:eats", 0) == eats_calls


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


async def test_extended_order_info_brings_each_orders_required_parts_inline(
    launch: TestClient, orders_state: TestClient, emulator: TestClient, unique: str
):
    taxi_id = await create_order_id(emulator, unique, "taxi", status="driving")
    eats_id = await create_order_id(emulator, unique, "eats")
    heavy_before = (await stats(emulator))["calls"]
    _, body, _ = await poll(
        launch,
        unique,
        {"supported_services": ["taxi", "eats"], "supported": ["extended_order_info"]},
        "/4.0/launch",
    )
    taxi, eats = body["mlutp_orders_state"]["orders"]
    assert (taxi["orderid"], eats["orderid"]) == (taxi_id, eats_id)
    heavy_after = (await stats(emulator))["calls"]
    fast_fields = POLICY.services["taxi"].rules[0].fields
    doc = await totw(emulator, unique, taxi_id)
    fast_info = taxi["parts"]["fast_info"]
    assert {k: v for k, v in fast_info.items() if k != "tag"} == {
        name: doc[name] for name in fast_fields if name in doc
    }
    assert taxi["need_request"] == ["rarely_changed", "static", "chat", "slow"]
    assert set(eats["parts"]) == {"full_info"} and eats["need_request"] == []
    # one call per inlined part, from its own upstream, nothing else
    assert heavy_after.get(ORDER_CORE, 0) - heavy_before.get(ORDER_CORE, 0) == 1
    assert heavy_after.get("totw", 0) - heavy_before.get("totw", 0) == 0
    assert heavy_after.get("eats_details", 0) - heavy_before.get("eats_details", 0) == 1
    # the inline tag is a part endpoint's tag: polling with it, the part is not needed
    _, polled, _ = await poll(
        orders_state,
        unique,
        {
            "known_orders": [
                {
                    "orderid": taxi_id,
                    "service": "taxi",
                    "status": "driving",
                    "tags": {"fast_info": fast_info["tag"]},
                }
            ]
        },
    )
    [again] = [o for o in polled["orders"] if o["orderid"] == taxi_id]
    assert "fast_info" not in again["need_request"]


async def test_a_required_part_that_could_not_be_fetched_is_left_out_and_stays_needed(
    launch: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, "taxi", status="driving")
    await set_fault(emulator, ORDER_CORE, "down")
    try:
        _, body, _ = await poll(
            launch,
            unique,
            {"supported_services": ["taxi"], "supported": ["extended_order_info"]},
            "/4.0/launch",
        )
    finally:
        await set_fault(emulator, ORDER_CORE, "ok")
    [order] = body["mlutp_orders_state"]["orders"]
    assert "parts" not in order and order["need_request"][0] == "fast_info"


async def test_without_extended_order_info_nothing_comes_inline(
    launch: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, "taxi", status="driving")
    _, body, _ = await poll(launch, unique, {"supported_services": ["taxi"]}, "/4.0/launch")
    [order] = body["mlutp_orders_state"]["orders"]
    assert "parts" not in order and "fast_info" in order["need_request"]


async def test_inline_parts_are_fetched_with_the_apps_part_parameters_or_the_defaults(
    launch: TestClient, emulator: TestClient, unique: str
):
    request = {"supported_services": ["taxi"], "supported": ["extended_order_info"]}
    position = {"point": [37.6, 55.7], "dx": 20}
    sent = {"position": position, "format_currency": False, "orders": "not passed on"}
    cases = (
        (
            f"{unique}-a",
            {"part_parameters": {"totw": sent}},
            {k: sent[k] for k in sent if k != "orders"},
        ),
        (f"{unique}-b", {}, {"format_currency": True}),  # the documented default for totw
    )
    for user, extra, expected in cases:
        taxi_id = await create_order_id(emulator, user, "taxi", status="driving")
        status, answer, _ = await poll(launch, user, {**request, **extra}, "/4.0/launch")
        assert status == 200
        # fetched inline: the order core took the parameters (it refuses a position of
        # another shape, as totw does)
        [order] = answer["mlutp_orders_state"]["orders"]
        assert "fast_info" in order["parts"], order
        last = (await stats(emulator))["recent"][ORDER_CORE][-1]["body"]
        # at_least: the stored content tag the inline part is tagged with (Part endpoints)
        assert {k: v for k, v in last.items() if k != "at_least"} == {
            **expected,
            "orderid": taxi_id,
        }


async def test_part_parameters_that_are_not_an_object_per_part_type_are_a_400(
    launch: TestClient, unique: str
):
    request = {"supported_services": ["taxi"], "supported": ["extended_order_info"]}
    for bad in (
        {"totw": [1]},
        {"Not A Type": {}},
        {"totw": {"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}},
    ):
        resp = await launch.post(
            "/4.0/launch",
            json={**request, "part_parameters": bad},
            headers={"X-Yandex-UID": unique},
        )
        assert resp.status == 400, (bad, await resp.text())

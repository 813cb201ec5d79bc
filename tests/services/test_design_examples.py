"""The design's own JSON examples, sent as written (with a user header), work against a real
stack: the launch request (its supported_services ends with the placeholder "etc..."), the
orders/state request, the taxi part request and the old taxiroute request. The bodies are
held here verbatim, in the design's order; each answer is checked for what the design says it
carries (docs/protocol.md)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp.test_utils import TestClient

from tests.emulator_api import create_order_id

LAUNCH_REQUEST = """
{
    "supported_services": ["taxi","eats","grocery","etc..."],
    "known_orders": [
        {
            "orderid": "order1",
            "tags": {
                "fast_info": "encoded_tags",
                "part2": "encoded_tags"
            },
            "service": "taxi",
            "status": "driving"
        },
        {
            "orderid":"order1",
            "tags": {
                "full_info": "encoded_tag"
            },
            "service": "eats",
            "status": "cooking",
            "some_field": "some_value"
        }
    ]
}
"""

STATE_REQUEST = """
{
    "known_orders": [
        {
            "orderid":"order1",
            "tags": {
                "fast_info": "encoded_tag",
                "part2": "encoded_tag"
            },
            "force": true,
            "service": "taxi",
            "status": "searching"
        },
        {
            "orderid":"order1",
            "tags": {
                "full_info": "encoded_tag"
            },
            "force": false,
            "service": "eats",
            "status": "cooking",
            "some_field": "some_value"
        }
    ]
}
"""

TAXIROUTE_REQUEST = """
{
    "coordinates": [
        37.67675076704057,
        55.681554945423315
    ],
    "timestamp": "2020-04-20T15:10:10+0300",
    "use_history": true
}
"""

TAXI_PART_REQUEST = """
{
    "extend_freecars": true,
    "format_currency": true,
    "supported": ["feature1", "featute2"],
    "position": {
        "point": [37.504381, 55.730800],
        "dx": 1009
    },
    "orders":[
        {
            "orderid":"order1",
            "tag": "encoded_part_tag"
        }
    ]
}
"""


async def send(client: TestClient, path: str, body: str, user: str) -> tuple[int, Any, Any]:
    resp = await client.post(
        path, data=body, headers={"X-Yandex-UID": user, "Content-Type": "application/json"}
    )
    return resp.status, await resp.json(), resp.headers


async def test_the_designs_launch_request_works_as_written(
    launch: TestClient, emulator: TestClient, unique: str
):
    taxi = await create_order_id(emulator, unique, "taxi", status="driving")
    status, body, headers = await send(launch, "/4.0/launch", LAUNCH_REQUEST, unique)
    assert status == 200, body
    state = body["mlutp_orders_state"]
    # the user's order, with the parts to fetch; the example's own "order1"s are no orders of
    # this user: left out as finished, as any unknown id is
    [order] = state["orders"]
    assert (order["orderid"], order["update_status"]) == (taxi, "actual")
    assert "fast_info" in order["need_request"]
    # "etc..." is a placeholder, ignored: no entry for it anywhere
    assert [entry["service"] for entry in state["allowed_changes"]] == ["taxi", "eats", "grocery"]
    assert {rule["service"] for rule in state["polling_policy"]} == {"taxi", "eats", "grocery"}
    assert int(headers["X-Yataxi-Polling-Interval-Ms"]) > 0


async def test_the_designs_poll_request_works_as_written(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    eats = await create_order_id(emulator, unique, "eats")
    status, body, headers = await send(
        orders_state, "/mlutp/v1/orders/state", STATE_REQUEST, unique
    )
    assert status == 200, body
    # the eats order the user has, which the client did not list: actual, every part needed
    [order] = body["orders"]
    assert (order["orderid"], order["update_status"]) == (eats, "actual")
    assert order["need_request"] == ["full_info"]
    assert [entry["service"] for entry in body["allowed_changes"]] == ["taxi", "eats"]
    assert int(headers["X-Yataxi-Polling-Interval-Ms"]) >= 1000


async def test_the_designs_taxi_part_request_works_as_written(
    orders_state: TestClient, unique: str
):
    status, body, _ = await send(
        orders_state, "/mlutp/v1/taxi/fast_info", TAXI_PART_REQUEST, unique
    )
    assert status == 200, body
    # "order1" is no order of this user: gone, as the design's error branch says
    assert body == {"orders": [{"orderid": "order1", "error": {"update_status": "expired"}}]}


async def test_the_designs_taxi_part_request_fetches_a_real_order_unchanged_otherwise(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    taxi = await create_order_id(emulator, unique, "taxi", status="driving")
    request = json.loads(TAXI_PART_REQUEST)
    request["orders"][0]["orderid"] = taxi
    status, body, _ = await send(
        orders_state, "/mlutp/v1/taxi/fast_info", json.dumps(request), unique
    )
    assert status == 200, body
    [part] = body["orders"]
    assert part["orderid"] == taxi and part["tag"] and part["status"] == "driving"


async def test_the_designs_taxiroute_request_works_as_written(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    taxi = await create_order_id(emulator, unique, "taxi", status="driving")
    status, body, _ = await send(orders_state, "/mlutp/v1/taxi/route", TAXIROUTE_REQUEST, unique)
    assert status == 200, body
    assert body["orderid"] == taxi and "route" in body

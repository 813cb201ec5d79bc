"""The emulator's upstreams: order sources, totw, details, taxiroute; users see only their own."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from emulator.documents import TOTW_FIELDS
from tests.emulator_api import advance, change, create_order, set_fault, stats


def uid(user: str) -> dict[str, str]:
    return {"X-Yandex-UID": user}


async def test_totw_is_a_realistic_order_document(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique, status="driving")
    resp = await emulator.post(
        "/3.0/taxiontheway", json={"orderid": order["orderid"]}, headers=uid(unique)
    )
    assert resp.status == 200
    raw = await resp.read()
    doc = await resp.json()
    assert 5 * 1024 <= len(raw) <= 15 * 1024
    assert len(TOTW_FIELDS | {"orderid"}) == 44
    assert 35 <= len(doc) <= 45
    assert doc["status"] == "driving" and doc["version"] == order["version"]
    assert {"driver", "route_sharing_url", "currency_rules", "orderperformerinfo"} <= set(doc)


async def test_optional_fields_come_and_go_with_status(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique, status="waiting")
    doc = await (await emulator.post("/3.0/taxiontheway", json=order, headers=uid(unique))).json()
    assert "cancel_rules" in doc and "feedback" not in doc
    for _ in range(2):  # → transporting → complete
        await advance(emulator, "taxi", order["orderid"])
    doc = await (await emulator.post("/3.0/taxiontheway", json=order, headers=uid(unique))).json()
    assert "cancel_rules" not in doc and "feedback" in doc


async def test_unknown_or_foreign_order_is_404(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique)
    for path in ("/3.0/taxiontheway", "/taxiroute/v1/route"):
        resp = await emulator.post(path, json={"orderid": "nope"}, headers=uid(unique))
        assert resp.status == 404
        resp = await emulator.post(path, json={"orderid": order["orderid"]}, headers=uid("other"))
        assert resp.status == 404
    eats = await create_order(emulator, unique, "eats")
    resp = await emulator.post(
        "/eats/v1/orders/details", json={"orderid": eats["orderid"]}, headers=uid("other")
    )
    assert resp.status == 404


async def test_eats_and_grocery_details(emulator: TestClient, unique: str):
    for service in ("eats", "grocery"):
        order = await create_order(emulator, unique, service)
        resp = await emulator.post(
            f"/{service}/v1/orders/details", json={"orderid": order["orderid"]}, headers=uid(unique)
        )
        assert resp.status == 200
        doc = await resp.json()
        assert doc["status"] == "created" and doc["items"] and doc["place"]["name"]


async def test_taxiroute_answers_a_route(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique, status="driving")
    resp = await emulator.post(
        "/taxiroute/v1/route",
        json={"orderid": order["orderid"], "coordinates": [37.5, 55.7], "use_history": True},
        headers=uid(unique),
    )
    assert resp.status == 200
    route = await resp.json()
    assert len(route["route"]) >= 2 and route["distance_left_m"] >= 0


async def test_a_driver_placed_at_a_distance_is_that_far_on_the_route(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="driving")
    for distance_m in (5_000, 300):
        resp = await emulator.post(
            f"/emulator/v1/orders/taxi/{order['orderid']}/driver",
            json={"distance_left_m": distance_m},
        )
        assert resp.status == 200, await resp.text()
        resp = await emulator.post(
            "/taxiroute/v1/route", json={"orderid": order["orderid"]}, headers=uid(unique)
        )
        assert abs((await resp.json())["distance_left_m"] - distance_m) <= 1
    for body in ({"distance_left_m": -1}, {"distance": 5}, {}):
        resp = await emulator.post(f"/emulator/v1/orders/taxi/{order['orderid']}/driver", json=body)
        assert resp.status == 400
    resp = await emulator.post("/emulator/v1/orders/taxi/nope/driver", json={"distance_left_m": 1})
    assert resp.status == 404


async def test_source_lists_only_the_users_own_active_orders(emulator: TestClient, unique: str):
    mine = await create_order(emulator, f"{unique}-a")
    await create_order(emulator, f"{unique}-b")
    resp = await emulator.post(
        "/sources/taxi/v1/orders/active", json={}, headers=uid(f"{unique}-a")
    )
    body = await resp.json()
    assert [o["orderid"] for o in body["orders"]] == [mine["orderid"]]
    listed = body["orders"][0]
    assert listed["status"] == "searching" and listed["created_at"] == mine["created_at"]
    assert listed["brief"]["short_address"]
    assert body["allowed_changes"] == {"can_make_more_orders": True}
    resp = await emulator.post(
        "/sources/eats/v1/orders/active", json={}, headers=uid(f"{unique}-a")
    )
    assert (await resp.json())["orders"] == []


async def test_source_refuses_more_orders_over_the_limit(emulator: TestClient, unique: str):
    for _ in range(2):
        await create_order(emulator, unique, "eats")
    resp = await emulator.post("/sources/eats/v1/orders/active", json={}, headers=uid(unique))
    assert (await resp.json())["allowed_changes"] == {
        "can_make_more_orders": False,
        "no_more_orders_reason": "active_orders_limit",
    }


async def test_upstreams_need_the_user(emulator: TestClient, unique: str):
    resp = await emulator.post("/sources/taxi/v1/orders/active", json={})
    assert resp.status == 401


async def test_stats_count_calls_bytes_and_forwarded_headers(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique)
    before = await stats(emulator)
    headers = {**uid(unique), "User-Agent": "ua/1", "X-Request-Id": f"rid-{unique}"}
    sizes = 0
    for _ in range(3):
        resp = await emulator.post(
            "/3.0/taxiontheway", json={"orderid": order["orderid"], "x": 1}, headers=headers
        )
        sizes += len(await resp.read())
    after = await stats(emulator)
    assert after["calls"]["totw"] - before["calls"].get("totw", 0) == 3
    assert after["bytes_sent"]["totw"] - before["bytes_sent"].get("totw", 0) == sizes
    last = after["recent"]["totw"][-1]
    assert last["headers"] == {
        "X-Yandex-UID": unique,
        "User-Agent": "ua/1",
        "X-Request-Id": f"rid-{unique}",
    }
    assert last["body"] == {"orderid": order["orderid"], "x": 1}


async def test_lagging_totw_answers_a_version_no_older_than_the_one_asked_for(
    emulator: TestClient, unique: str
):
    """The design passes the tag to totw so that order_proc's version can be honoured: a read
    replica one version behind serves a call that asks for no newer version, and the primary
    serves one that does (through the client's content tag or the one stored before the call)."""
    order = await create_order(emulator, unique, status="driving")
    changed = await change(emulator, "taxi", order["orderid"], {"comment": "gate 3"})
    old, new = order["version"], changed["version"]
    await set_fault(emulator, "totw", "lagging")

    async def version_served(body: dict[str, Any]) -> int:
        resp = await emulator.post(
            "/3.0/taxiontheway", json={"orderid": order["orderid"], **body}, headers=uid(unique)
        )
        assert resp.status == 200, await resp.text()
        version: int = (await resp.json())["version"]
        return version

    assert await version_served({}) == old
    assert await version_served({"tags": {"fast_info": f"v{old}"}}) == old
    assert await version_served({"tags": {"fast_info": f"v{new}"}}) == new
    assert await version_served({"at_least": {"fast_info": f"v{new}"}}) == new
    assert await version_served({"tags": {"chat": "bump-1"}}) == old  # no version in it
    await set_fault(emulator, "totw", "ok")
    assert await version_served({}) == new


async def test_totw_refuses_a_position_of_another_shape_than_the_design_notes(
    emulator: TestClient, unique: str
):
    """docs/protocol.md (Part endpoints): `position` is `{"point": [lon, lat], "dx": <metres>}`;
    a real totw would misread another shape, so the emulator's refuses it."""
    order = await create_order(emulator, unique, status="driving")

    async def status(**fields: Any) -> int:
        body = {"orderid": order["orderid"], **fields}
        return (await emulator.post("/3.0/taxiontheway", json=body, headers=uid(unique))).status

    assert await status() == 200  # absent: the app does not know where it is
    for good in (
        {"point": [37.5, 55.7], "dx": 1009},
        {"point": [37, 55], "dx": 0},
        {"point": [-122.4, 37.8], "dx": 12.5},
    ):
        assert await status(position=good) == 200, good
    for bad in (
        [37.5, 55.7],  # the old clients' bare [lon, lat]
        None,
        "37.5,55.7",
        {"point": [37.5, 55.7]},
        {"dx": 1009},
        {"point": [37.5], "dx": 1009},
        {"point": [37.5, 55.7, 120.0], "dx": 1009},
        {"point": ["37.5", "55.7"], "dx": 1009},
        {"point": [True, False], "dx": 1009},
        {"point": {"lon": 37.5, "lat": 55.7}, "dx": 1009},
        {"point": [37.5, 55.7], "dx": -1},
        {"point": [37.5, 55.7], "dx": "1009"},
        {"point": [37.5, 55.7], "dx": None},
    ):
        assert await status(position=bad) == 400, bad


async def test_every_answer_of_an_order_source_names_a_list_tag(emulator: TestClient, unique: str):
    """docs/protocol.md, List tags: a source with list tags names the list tag of the data it
    serves in every answer. The primary serves the tag it was asked for; a replica that has no
    tag for its data (here: the user had no list yet a minute ago) names one no list has."""
    await create_order(emulator, unique)

    async def served(body: dict[str, Any]) -> Any:
        resp = await emulator.post("/sources/taxi/v1/orders/active", json=body, headers=uid(unique))
        assert resp.status == 200
        return (await resp.json()).get("list_tag")

    await set_fault(emulator, "source:taxi", "lagging", delay_ms=60_000)
    replica = await served({"at_least": "b1-read"})
    assert replica not in (None, "", "b1-read")
    await set_fault(emulator, "source:taxi", "ok")
    assert await served({"at_least": "b1-read"}) == "b1-read"
    # asked with no tag, it does not know which tag its data stands for: one no list has
    assert await served({}) not in (None, "")


async def test_every_part_type_is_also_at_parts_its_name_as_its_own_endpoint_serves_it(
    emulator: TestClient, unique: str
):
    """A BFF pointed at the emulator finds each part upstream at /parts/<name>: a part type
    with an endpoint of its own is served there by it (the same document, counted and
    faulted as that endpoint), so the product needs no map of the emulator's paths."""
    taxi = await create_order(emulator, unique, status="driving")
    eats = await create_order(emulator, unique, "eats")
    grocery = await create_order(emulator, unique, "grocery")
    cases = [
        ("totw", "/3.0/taxiontheway", taxi, "totw"),
        ("eats_full", "/eats/v1/orders/details", eats, "eats_details"),
        ("grocery_full", "/grocery/v1/orders/details", grocery, "grocery_details"),
        ("taxiroute", "/taxiroute/v1/route", taxi, "taxiroute"),
    ]
    for part_type, own_path, order, target in cases:
        body = {"orderid": order["orderid"]}
        own = await (await emulator.post(own_path, json=body, headers=uid(unique))).json()
        before = (await stats(emulator))["calls"].get(target, 0)
        resp = await emulator.post(f"/parts/{part_type}", json=body, headers=uid(unique))
        assert resp.status == 200, part_type
        # a route is made at the call: its updated_at is that moment
        served = await resp.json()
        assert served | {"updated_at": None} == own | {"updated_at": None}, part_type
        assert (await stats(emulator))["calls"][target] == before + 1, part_type
    await set_fault(emulator, "totw", "error500")
    resp = await emulator.post(
        "/parts/totw", json={"orderid": taxi["orderid"]}, headers=uid(unique)
    )
    assert resp.status == 500

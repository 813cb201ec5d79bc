"""The feature services' user change endpoints (docs/protocol.md: Feature data and user changes):
versioned features refuse a stale version with 409 and change nothing; last-write-wins ones
change nothing twice for one idempotency key and keep the latest request by its time."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from tests.emulator_api import advance, create_order, totw

DESTINATION = [{"point": [37.6, 55.7], "short_text": "Red Square"}]


async def user_change(
    emulator: TestClient, user: str, orderid: str, feature: str, body: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    resp = await emulator.post(
        f"/emulator/v1/features/taxi/{orderid}/{feature}",
        json=body,
        headers={"X-Yandex-UID": user},
    )
    return resp.status, await resp.json()


async def active_orders(emulator: TestClient, user: str, service: str) -> list[dict[str, Any]]:
    resp = await emulator.post(
        f"/sources/{service}/v1/orders/active", json={}, headers={"X-Yandex-UID": user}
    )
    assert resp.status == 200
    orders: list[dict[str, Any]] = (await resp.json())["orders"]
    return orders


async def changes_since(emulator: TestClient, since: int) -> list[dict[str, Any]]:
    resp = await emulator.get("/emulator/v1/changes", params={"since": since})
    changes: list[dict[str, Any]] = (await resp.json())["changes"]
    return changes


async def test_a_versioned_change_on_the_version_held_applies_and_returns_the_new_one(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="driving")
    status, changed = await user_change(
        emulator,
        unique,
        order["orderid"],
        "destination",
        {"version": order["version"], "value": DESTINATION},
    )
    assert status == 200 and changed["version"] == order["version"] + 1
    doc = await totw(emulator, unique, order["orderid"])
    assert doc["destinations"] == DESTINATION and doc["version"] == changed["version"]


async def test_a_stale_version_is_a_409_with_the_current_version_and_changes_nothing(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="driving")
    orderid = order["orderid"]
    _, first = await user_change(
        emulator, unique, orderid, "comment", {"version": order["version"], "value": "gate 1"}
    )
    before = await totw(emulator, unique, orderid)
    # another device of the user still holds the version before that change
    status, error = await user_change(
        emulator, unique, orderid, "comment", {"version": order["version"], "value": "gate 2"}
    )
    assert status == 409
    assert error["code"] == "version_conflict" and error["current_version"] == first["version"]
    assert await totw(emulator, unique, orderid) == before
    # holding the current version, the retry applies
    status, _ = await user_change(
        emulator, unique, orderid, "comment", {"version": first["version"], "value": "gate 2"}
    )
    assert status == 200 and (await totw(emulator, unique, orderid))["comment"] == "gate 2"


async def test_an_unrelated_change_is_no_conflict(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique, status="driving")
    await advance(emulator, "taxi", order["orderid"])  # the data version moved on
    status, _ = await user_change(
        emulator,
        unique,
        order["orderid"],
        "comment",
        {"version": order["version"], "value": "at the gate"},
    )
    assert status == 200  # the comment itself has not changed since the version held


async def test_a_repeated_idempotency_key_changes_nothing_twice(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique, status="driving")
    tips = {"idempotency_key": "k1", "requested_at_ms": 1_000, "value": {"value": 10}}
    status, first = await user_change(emulator, unique, order["orderid"], "tips", tips)
    assert status == 200
    status, again = await user_change(emulator, unique, order["orderid"], "tips", tips)
    assert status == 200 and again == first
    assert (await totw(emulator, unique, order["orderid"]))["version"] == first["version"]


async def test_last_write_wins_by_the_time_of_the_request(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique, status="driving")
    orderid = order["orderid"]
    later = {"idempotency_key": "late", "requested_at_ms": 2_000, "value": {"value": 20}}
    earlier = {"idempotency_key": "early", "requested_at_ms": 1_000, "value": {"value": 5}}
    await user_change(emulator, unique, orderid, "tips", later)
    status, _ = await user_change(emulator, unique, orderid, "tips", earlier)  # arrives late
    assert status == 200
    assert (await totw(emulator, unique, orderid))["tips"] == {"value": 20}


async def test_a_change_the_status_does_not_allow_is_a_409_naming_why(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="transporting")
    status, error = await user_change(
        emulator, unique, order["orderid"], "comment", {"version": order["version"], "value": "x"}
    )
    assert status == 409
    assert error["code"] == "not_allowed" and error["reason"] == "too_late"


async def test_another_users_order_and_bad_changes_are_refused(emulator: TestClient, unique: str):
    order = await create_order(emulator, unique, status="driving")
    status, _ = await user_change(
        emulator, f"{unique}-x", order["orderid"], "comment", {"version": 1, "value": "x"}
    )
    assert status == 404
    for feature, body, expected in (
        ("paint", {"version": 1}, 404),  # no such feature: no such endpoint
        ("comment", {"value": "x"}, 400),  # versioned: the version is needed
        ("tips", {"value": {"value": 1}}, 400),  # last-write-wins: the key is needed
        ("tips", {"idempotency_key": "k", "version": 1}, 400),  # tips has no version
        ("feedback", {"rating": 5}, 400),  # not finished: nothing to rate
    ):
        status, error = await user_change(emulator, unique, order["orderid"], feature, body)
        assert status == expected, (feature, status)
        assert error["code"] and error["message"]


async def test_a_cancelled_order_leaves_the_active_orders_with_its_tag_bumped(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="driving")
    status, changed = await user_change(emulator, unique, order["orderid"], "cancel", {})
    assert status == 200 and changed["version"] == order["version"] + 1
    listed = await active_orders(emulator, unique, "taxi")
    assert order["orderid"] not in [o["orderid"] for o in listed]
    # the cancel is a data change of a part's fields: its tag is set (waiting polls wake)
    [change] = [
        c
        for c in await changes_since(emulator, 0)
        if c["orderid"] == order["orderid"] and c["version"] == changed["version"]
    ]
    assert "cancel_rules" in change["fields"]


async def test_cancel_is_refused_where_the_orders_capability_does_not_allow_it(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="transporting")
    status, refused = await user_change(emulator, unique, order["orderid"], "cancel", {})
    assert status == 409
    assert refused["code"] == "not_allowed" and refused["reason"] == "trip_started"
    listed = await active_orders(emulator, unique, "taxi")
    assert order["orderid"] in [o["orderid"] for o in listed]
    # and it is the user's own order that can be cancelled, nobody else's
    status, _ = await user_change(emulator, f"{unique}-x", order["orderid"], "cancel", {})
    assert status == 404

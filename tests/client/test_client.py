"""The reference client end to end (SPEC: Reference client; Feature data and user changes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from client.client import MlutpClient
from tests.emulator_api import advance, change, create_order_id, set_fault
from tests.services.conftest import POLICY, protocol_for_tests

TAXI_FIELDS = [f for r in POLICY.services["taxi"].rules if r.tag_defined for f in r.fields]


async def totw(emulator: TestClient, user: str, orderid: str) -> dict[str, Any]:
    resp = await emulator.post(
        "/3.0/taxiontheway", json={"orderid": orderid}, headers={"X-Yandex-UID": user}
    )
    doc: dict[str, Any] = await resp.json()
    return doc


def cut(doc: dict[str, Any]) -> dict[str, Any]:
    return {name: doc[name] for name in TAXI_FIELDS if name in doc}


async def test_a_client_sees_every_change_of_a_lifecycle(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique)
    client = make_client(unique)
    await client.launch()
    [view] = client.view()
    assert view.status == "searching" and not view.loading
    assert view.data == cut(await totw(emulator, unique, orderid))
    for status in ("driving", "waiting", "transporting"):
        await advance(emulator, "taxi", orderid)
        await client.cycle()
        [view] = client.view()
        assert view.status == status
        assert view.data == cut(
            await totw(emulator, unique, orderid)
        )  # optional fields come and go
    await change(emulator, "taxi", orderid, {"comment": "gate 3"})
    await client.cycle()
    assert client.view()[0].data["comment"] == "gate 3"
    await advance(emulator, "taxi", orderid)  # complete: finished
    await client.cycle()
    assert client.view() == []


async def test_an_unchanged_order_costs_one_poll_and_no_part_request(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    parts_before = client.stats.part_requests
    await client.cycle()
    assert client.stats.part_requests == parts_before


@pytest.mark.parametrize("protocol", [protocol_for_tests()])  # the default min TTL: 2 s
async def test_after_a_user_change_force_unlocks_as_soon_as_the_version_appears(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    version = (await change(emulator, "taxi", orderid, {"tips": {"value": 15}}))["version"]
    client.user_changed("taxi", orderid, version)
    assert client.view()[0].locked
    await client.cycle()  # tags issued < 2 s ago: only force gets the change now
    [view] = client.view()
    assert not view.locked
    assert view.data["tips"] == {"value": 15} and view.data["version"] == version
    await client.cycle()
    assert client._known()[0].get("force") is None  # no force once seen


async def test_a_source_down_shows_a_stale_loader_and_recovery_moves_nothing(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    for service in ("taxi", "eats", "taxi"):
        await create_order_id(emulator, unique, service)
    client = make_client(unique)
    await client.launch()
    shown = [(v.service, v.orderid) for v in client.view()]
    eats_view = next(v for v in client.view() if v.service == "eats")
    await set_fault(emulator, "source:eats", "down")
    await client.cycle()
    assert [(v.service, v.orderid) for v in client.view()] == shown
    stale = next(v for v in client.view() if v.service == "eats")
    assert stale.update_status == "stale" and stale.loading
    assert stale.data == eats_view.data and stale.status == eats_view.status
    await set_fault(emulator, "source:eats", "ok")
    await client.cycle()
    assert [(v.service, v.orderid) for v in client.view()] == shown
    assert {v.update_status for v in client.view()} == {"actual"}
    assert not any(v.loading for v in client.view())


async def test_part_errors_mark_fields_stale_then_recover(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    await set_fault(emulator, "totw", "error500")
    await change(emulator, "taxi", orderid, {"comment": "new"})
    await client.cycle()
    [view] = client.view()
    assert {"comment", "payment", "status_info", "driver"} <= view.stale_fields
    assert view.data.get("comment") == ""  # the old value, flagged
    await set_fault(emulator, "totw", "ok")
    await client.cycle()
    [view] = client.view()
    assert view.stale_fields == frozenset() and view.data["comment"] == "new"


async def test_a_required_part_holds_the_view_until_it_arrives(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    rules = client.rules["taxi"]
    fast_info = rules[0]
    assert fast_info.required and fast_info.part_name == "fast_info"
    # the fast_info endpoint fails (a real 404 from the real server); rarely_changed works
    rules[0] = dataclasses.replace(fast_info, url="/mlutp/v1/taxi/no-such-part")
    await change(emulator, "taxi", orderid, {"comment": "held"})
    await client.cycle()
    [view] = client.view()
    assert client.orders[0].parts["rarely_changed"].fields["comment"] == "held"  # arrived...
    assert view.data["comment"] == ""  # ...but not shown
    rules[0] = fast_info
    await client.cycle()
    assert client.view()[0].data["comment"] == "held"


async def test_an_expired_order_is_dropped(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    client.user_id = f"{unique}-someone-else"  # the upstream no longer knows it for this user
    client.orders[0].parts["fast_info"].tag = None
    await client._fetch_parts({("taxi", client.orders[0].orderid): ["fast_info"]})
    assert client.orders == []

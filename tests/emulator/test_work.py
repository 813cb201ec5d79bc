"""The taxi part services and the work the upstreams do (docs/development.md: Upstream work):
each service answers its own fields, legacy totw is assembled from the same services and
costs the sum of its fields, and the work is counted per upstream and per user, on the stats
endpoint and /metrics."""

from __future__ import annotations

from aiohttp.test_utils import TestClient

from emulator.documents import TAXI_PART_SERVICES, TOTW_UNPARTED_FIELDS
from emulator.work import FIELD_COSTS, answer_work, field_cost
from tests.emulator_api import create_order, part_service, stats, totw


def uid(user: str) -> dict[str, str]:
    return {"X-Yandex-UID": user}


async def test_each_taxi_part_service_answers_only_its_own_fields(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="driving")
    legacy = await totw(emulator, unique, order["orderid"])
    for name, fields in TAXI_PART_SERVICES.items():
        answer = await part_service(emulator, name, unique, order["orderid"])
        assert set(answer) - {"orderid"} <= set(fields) and len(answer) > 1, name
        # the same data legacy totw answers with
        assert answer == {k: legacy[k] for k in answer}, name
    eats = await create_order(emulator, unique, "eats")
    resp = await emulator.post(
        "/parts/order_core", json={"orderid": eats["orderid"]}, headers=uid(unique)
    )
    assert resp.status == 404  # the order core knows taxi orders only


async def test_legacy_totw_is_the_part_services_fields_and_its_own_and_costs_their_sum(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="driving")
    before = await stats(emulator)
    legacy = await totw(emulator, unique, order["orderid"])
    after = await stats(emulator)
    parted = {name for fields in TAXI_PART_SERVICES.values() for name in fields}
    assert set(legacy) - {"orderid"} <= parted | set(TOTW_UNPARTED_FIELDS)
    assert {"typed_experiments", "notifications", "ads"} <= set(legacy)  # no part has them
    work = after["work"]["totw"] - before["work"].get("totw", 0)
    assert work == sum(field_cost(name) for name in legacy if name != "orderid")
    assert work == answer_work(legacy) > 0
    # each field priced by the table; every field of the document is in it
    assert set(legacy) - {"orderid"} <= set(FIELD_COSTS)
    # the legacy document costs what every part service's answer and its own fields cost
    parts = [
        await part_service(emulator, name, unique, order["orderid"]) for name in TAXI_PART_SERVICES
    ]
    own = {name: legacy[name] for name in TOTW_UNPARTED_FIELDS if name in legacy}
    assert work == sum(answer_work(part) for part in parts) + answer_work(own)


async def test_work_is_counted_per_upstream_and_per_user_and_exposed(
    emulator: TestClient, unique: str
):
    order = await create_order(emulator, unique, status="driving")
    chat = await part_service(emulator, "orderchat", unique, order["orderid"])
    await part_service(emulator, "orderchat", unique, order["orderid"])
    legacy = await totw(emulator, unique, order["orderid"])
    mine = await (await emulator.get("/emulator/v1/stats", params={"user_id": unique})).json()
    assert mine["work"] == {"part:orderchat": 2 * answer_work(chat), "totw": answer_work(legacy)}
    assert mine["calls"] == {"part:orderchat": 2, "totw": 1}
    everyone = await stats(emulator)
    assert everyone["work"]["part:orderchat"] >= 2 * answer_work(chat)
    metrics = await (await emulator.get("/metrics")).text()
    exposed = {
        line.split("} ")[0] + "}": float(line.split("} ")[1])
        for line in metrics.splitlines()
        if line.startswith("mlutp_emulator_upstream_work_total{")
    }
    totw_work = exposed['mlutp_emulator_upstream_work_total{upstream="totw"}']
    assert totw_work == everyone["work"]["totw"]
    assert (
        exposed['mlutp_emulator_upstream_work_total{upstream="part:orderchat"}']
        == everyone["work"]["part:orderchat"]
    )

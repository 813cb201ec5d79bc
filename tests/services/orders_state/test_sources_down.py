"""A source down: stale echo, allowed_changes, ordering kept, nothing moves on recovery."""

from __future__ import annotations

import pytest
import redis
from aiohttp.test_utils import TestClient

from tests.emulator_api import create_order_id, set_fault, stats
from tests.helpers import POLICY, MakeApp, poll


@pytest.fixture
async def orders_state(make_orders_state: MakeApp) -> TestClient:
    """Every source asked on every poll (list tags off): these tests are about a source that
    fails when it is asked. With list tags an unchanged list is answered from the answer kept
    under its tag, and the source is not asked at all (tests/services/orders_state/
    test_list_tags.py)."""
    return await make_orders_state(protocol={"list_tags": False})


async def shown_orders(orders_state: TestClient, user: str) -> list[dict]:
    _, body, _ = await poll(orders_state, user, {"supported_services": ["taxi", "eats"]})
    return list(body["orders"])


def as_known(orders: list[dict], extra: dict | None = None) -> list[dict]:
    return [
        {
            "orderid": o["orderid"],
            "service": o["service"],
            "status": o["status"],
            "tags": o["tags"],
            **(extra or {}),
        }
        for o in orders
    ]


async def test_a_source_down_gives_stale_echo_and_nothing_moves_when_it_is_back(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    for service in ("taxi", "eats", "taxi", "eats"):
        await create_order_id(emulator, unique, service)
    shown = await shown_orders(orders_state, unique)
    known = as_known(shown, {"some_field": "echo me"})
    known[1]["tags"] = {"full_info": "opaque-client-tag"}

    for mode in ("down", "error500", "slow"):
        await set_fault(emulator, "source:eats", mode, delay_ms=2500)
        status, body, _ = await poll(
            orders_state, unique, {"known_orders": known, "supported_services": ["taxi", "eats"]}
        )
        assert status == 200
        assert [o["orderid"] for o in body["orders"]] == [o["orderid"] for o in shown]
        for order, sent in zip(body["orders"], known, strict=True):
            if order["service"] == "eats":
                # nothing may be changed on data the server cannot see
                nothing_allowed = {
                    kind: {"allowed": False, "reason": "service_unavailable"}
                    for kind in POLICY.services["eats"].change_capabilities
                }
                assert nothing_allowed
                assert order == {
                    **sent,
                    "need_request": [],
                    "update_status": "stale",
                    "change_capabilities": nothing_allowed,
                }
            else:
                assert order["update_status"] == "actual" and "some_field" not in order
        assert body["allowed_changes"] == [
            {"service": "taxi", "can_make_more_orders": True},
            {
                "service": "eats",
                "can_make_more_orders": False,
                "no_more_orders_reason": "service_unavailable",
            },
        ]

    await set_fault(emulator, "source:eats", "ok")
    _, body, _ = await poll(orders_state, unique, {"known_orders": known})
    assert [o["orderid"] for o in body["orders"]] == [o["orderid"] for o in shown]
    assert {o["update_status"] for o in body["orders"]} == {"actual"}


async def test_an_unavailable_source_doubles_the_interval(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, "taxi", status="driving")
    _, _, normal = await poll(orders_state, unique, {"supported_services": ["taxi", "eats"]})
    await set_fault(emulator, "source:eats", "error500")
    _, _, degraded = await poll(orders_state, unique, {"supported_services": ["taxi", "eats"]})
    assert (normal, degraded) == (3000, 6000)


async def test_a_source_is_retried_once_on_5xx(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await set_fault(emulator, "source:grocery", "error500")
    before = (await stats(emulator))["calls"].get("source:grocery", 0)
    await poll(orders_state, unique, {"supported_services": ["grocery"]})
    after = (await stats(emulator))["calls"]["source:grocery"]
    assert after - before == 2


async def test_a_slow_source_is_not_retried_and_does_not_hold_the_poll_past_its_deadline(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await set_fault(emulator, "source:grocery", "slow", delay_ms=3000)
    before = (await stats(emulator))["calls"].get("source:grocery", 0)
    status, body, _ = await poll(orders_state, unique, {"supported_services": ["taxi", "grocery"]})
    assert status == 200
    assert body["allowed_changes"][1]["no_more_orders_reason"] == "service_unavailable"
    after = (await stats(emulator))["calls"]["source:grocery"]
    assert after - before == 1


async def test_another_users_order_ids_reveal_nothing(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    victim = f"{unique}-a"
    taxi_id = await create_order_id(emulator, victim, "taxi", status="driving")
    eats_id = await create_order_id(emulator, victim, "eats")
    guessed = [
        {"orderid": taxi_id, "service": "taxi", "status": "mine?", "tags": {}},
        {"orderid": eats_id, "service": "eats", "status": "mine?", "tags": {}},
    ]
    _, body, _ = await poll(orders_state, f"{unique}-b", {"known_orders": guessed})
    assert body["orders"] == []
    # with the source down, the attacker only gets back what it sent itself (an attacker
    # whose list was never kept: the source is asked)
    await set_fault(emulator, "source:eats", "down")
    _, body, _ = await poll(orders_state, f"{unique}-c", {"known_orders": guessed})
    [stale] = body["orders"]
    assert stale == {
        **guessed[1],
        "need_request": [],
        "update_status": "stale",
        "change_capabilities": {
            kind: {"allowed": False, "reason": "service_unavailable"}
            for kind in POLICY.services["eats"].change_capabilities
        },
    }


async def test_a_launch_listing_only_the_stale_order_places_it_by_its_created_at(
    orders_state: TestClient, launch: TestClient, emulator: TestClient, unique: str
):
    """docs/protocol.md, Orders and their order: the design's "restore the order as if the
    service works, so that after it comes back nothing moves", also when the client listed
    only the stale order (an app restarted with one known order, its service down), where the
    neighbour rule has nothing to go by."""
    taxi = await create_order_id(emulator, unique, "taxi")
    eats = await create_order_id(emulator, unique, "eats")
    shown = await shown_orders(orders_state, unique)
    assert [o["orderid"] for o in shown] == [taxi, eats]
    # every actual order carries its created_at; the client echoes it as a brief field
    [eats_order] = [o for o in shown if o["orderid"] == eats]
    assert eats_order["created_at"]
    known = [
        {
            "orderid": eats,
            "service": "eats",
            "status": eats_order["status"],
            "tags": {},
            "created_at": eats_order["created_at"],
        }
    ]
    body = {"supported_services": ["taxi", "eats"], "known_orders": known}
    await set_fault(emulator, "source:eats", "down")
    _, during, _ = await poll(launch, unique, body, "/4.0/launch")
    orders = during["mlutp_orders_state"]["orders"]
    assert [(o["orderid"], o["update_status"]) for o in orders] == [
        (taxi, "actual"),
        (eats, "stale"),
    ]
    # the stale answer keeps the created_at, so the client keeps echoing it
    assert orders[1]["created_at"] == eats_order["created_at"]
    await set_fault(emulator, "source:eats", "ok")
    _, after, _ = await poll(launch, unique, body, "/4.0/launch")
    assert [o["orderid"] for o in after["mlutp_orders_state"]["orders"]] == [taxi, eats]

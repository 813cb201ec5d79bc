"""POST /mlutp/v1/orders/state against a real stack: every rule of the protocol's poll."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient

from services.bff.resources import ENGINE
from services.bff.wire import MAX_SUPPORTED_SERVICES
from shared.protocol.answer_tag import MAX_ANSWER_TAG_LENGTH, answer_tag
from shared.redis import tags_key
from tests.emulator_api import advance, change, create_order_id, stats
from tests.helpers import (
    DEPRECATED_TAXI_VERSION,
    POLICY,
    TAXI_TAG_DEFINED,
    all_tags,
    client_tag,
    poll,
    poll_one,
    stored_parts,
)


async def test_a_new_order_needs_every_tag_defined_part_by_priority(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    status, body, interval = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    assert status == 200
    [order] = body["orders"]
    assert order["orderid"] == orderid and order["status"] == "driving"
    assert order["update_status"] == "actual"
    assert order["need_request"] == TAXI_TAG_DEFINED  # route is polled by its own rules
    assert order["tags"] == {}
    assert order["short_address"]  # brief fields from the source
    assert interval == 3000  # taxi driving


async def test_unchanged_parts_are_not_needed_and_valid_tags_are_echoed(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    tags = all_tags(redis_sync, orderid, age_ms=60_000)
    body = await poll_one(orders_state, unique, orderid, tags)
    [order] = body["orders"]
    assert order["need_request"] == []
    assert order["tags"] == tags


async def test_a_change_is_needed_once_min_ttl_has_passed(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    fresh, old = all_tags(redis_sync, orderid), all_tags(redis_sync, orderid, age_ms=2_500)
    await change(emulator, "taxi", orderid, {"comment": "x"})
    known = {"orderid": orderid, "service": "taxi", "status": "searching"}
    _, body, _ = await poll(orders_state, unique, {"known_orders": [{**known, "tags": fresh}]})
    assert body["orders"][0]["need_request"] == []  # changed, but fetched < 2 s ago
    _, body, _ = await poll(orders_state, unique, {"known_orders": [{**known, "tags": old}]})
    assert body["orders"][0]["need_request"] == ["fast_info", "rarely_changed"]


async def test_force_skips_min_ttl(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    fresh = all_tags(redis_sync, orderid)
    await change(emulator, "taxi", orderid, {"tips": {"value": 10}})
    body = await poll_one(orders_state, unique, orderid, fresh, force=True)
    assert body["orders"][0]["need_request"] == ["fast_info", "rarely_changed"]


async def test_a_static_part_with_a_valid_tag_is_never_needed(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    tags = all_tags(redis_sync, orderid, age_ms=3_600_000)
    tags["static"] = client_tag("taxi", "whatever-content", age_ms=3_600_000)
    body = await poll_one(orders_state, unique, orderid, tags, force=True)
    assert "static" not in body["orders"][0]["need_request"]


async def test_invalid_tags_and_tags_of_another_policy_version_are_needed_and_not_echoed(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    tags = all_tags(redis_sync, orderid, age_ms=60_000)
    tags["fast_info"] = "garbage"
    tags["static"] = f"{DEPRECATED_TAXI_VERSION}.1.dg"  # a tag of the deprecated taxi policy
    body = await poll_one(orders_state, unique, orderid, tags)
    [order] = body["orders"]
    assert order["need_request"] == ["fast_info", "static"]
    assert "fast_info" not in order["tags"] and "static" not in order["tags"]
    assert order["tags"]["chat"] == tags["chat"]


async def test_a_finished_order_is_left_out(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, "eats", status="delivering")
    await advance(emulator, "eats", orderid)  # → delivered
    _, body, _ = await poll(
        orders_state,
        unique,
        {
            "known_orders": [
                {"orderid": orderid, "service": "eats", "status": "delivering", "tags": {}}
            ]
        },
    )
    assert body["orders"] == []


async def test_a_service_the_server_does_not_serve_is_unavailable_not_bad_input(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    boat = {"orderid": "b1", "service": "boats", "status": "sailing", "tags": {"hull": "h"}}
    status, body, interval = await poll(
        orders_state,
        unique,
        {"known_orders": [{**boat, "cabin": "7"}], "supported_services": ["taxi", "scooters"]},
    )
    assert status == 200
    stale, actual = body["orders"]  # the stale order keeps its place: first, as listed
    assert stale == {
        **boat,
        "cabin": "7",
        "need_request": [],
        "update_status": "stale",
        "change_capabilities": {},  # a service not served defines none
    }
    assert actual["orderid"] == orderid and actual["update_status"] == "actual"
    unavailable = {"can_make_more_orders": False, "no_more_orders_reason": "service_unavailable"}
    assert body["allowed_changes"] == [
        {"service": "taxi", "can_make_more_orders": True},
        {"service": "scooters", **unavailable},
        {"service": "boats", **unavailable},
    ]
    assert interval == 6000  # driving's 3000, doubled: the client holds an order it cannot see
    # a service merely listed as supported costs nothing: not degraded
    _, body, interval = await poll(
        orders_state, unique, {"supported_services": ["taxi", "scooters"]}
    )
    assert interval == 3000 and [o["orderid"] for o in body["orders"]] == [orderid]


async def test_supported_services_are_queried_once_each_and_bounded(
    orders_state: TestClient, launch: TestClient, unique: str
):
    names = [f"s{i}" for i in range(MAX_SUPPORTED_SERVICES - 3)]
    # a name listed twice is one service queried: one allowed_changes entry, first seen first
    listed = ["taxi", *names, "taxi", names[0]]
    assert len(listed) == MAX_SUPPORTED_SERVICES
    status, body, _ = await poll(orders_state, unique, {"supported_services": listed})
    assert status == 200
    assert [entry["service"] for entry in body["allowed_changes"]] == ["taxi", *names]
    # names past the first ones considered are ignored, on both endpoints that take the list
    past = {"supported_services": [*listed, "one_more"]}
    for client, path in [(orders_state, "/mlutp/v1/orders/state"), (launch, "/4.0/launch")]:
        status, body, _ = await poll(client, unique, past, path)
        assert status == 200, path
        state = body["mlutp_orders_state"] if path == "/4.0/launch" else body
        assert [entry["service"] for entry in state["allowed_changes"]] == ["taxi", *names]


@pytest.mark.parametrize("path", ["/mlutp/v1/orders/state", "/4.0/launch"])
async def test_a_malformed_name_in_supported_services_is_ignored_not_a_400(
    orders_state: TestClient, launch: TestClient, emulator: TestClient, unique: str, path: str
):
    """docs/protocol.md: supported_services says what the app can show; the design's own
    launch example lists the placeholder "etc...", and one odd name must never cost the user
    their orders."""
    client = launch if path == "/4.0/launch" else orders_state
    orderid = await create_order_id(emulator, unique, status="driving")
    body = {"supported_services": ["taxi", "etc...", "Eats", "", "x" * 40, "eats"]}
    status, answer, _ = await poll(client, unique, body, path)
    assert status == 200, answer
    state = answer["mlutp_orders_state"] if path == "/4.0/launch" else answer
    assert [o["orderid"] for o in state["orders"]] == [orderid]
    # no entry anywhere for an ignored name
    assert [entry["service"] for entry in state["allowed_changes"]] == ["taxi", "eats"]
    metrics = await (await client.get("/metrics")).text()
    assert 'mlutp_ignored_service_names_total{reason="malformed"} 4.0' in metrics


async def test_an_order_carries_what_the_user_may_change_now_from_its_source(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    _, body, _ = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    [order] = body["orders"]
    assert order["change_capabilities"] == {
        "cancel": {"allowed": True},
        "change_destination": {"allowed": True},
        "add_tips": {"allowed": True},
        "change_payment": {"allowed": True},
        "comment": {"allowed": True},
    }
    await advance(emulator, "taxi", orderid)  # waiting
    await advance(emulator, "taxi", orderid)  # transporting: the trip has started
    _, body, _ = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    capabilities = body["orders"][0]["change_capabilities"]
    assert capabilities["cancel"] == {"allowed": False, "reason": "trip_started"}
    assert capabilities["comment"] == {"allowed": False, "reason": "too_late"}
    assert capabilities["change_destination"] == {"allowed": True}


async def test_every_answer_names_the_policy_version_served_of_each_queried_service(
    orders_state: TestClient, launch: TestClient, unique: str
):
    body = {"supported_services": ["taxi", "eats", "scooters"]}  # scooters: not served
    expected = {service: POLICY.version(service) for service in ("taxi", "eats")}
    _, polled, _ = await poll(orders_state, unique, body)
    assert polled["policy_versions"] == expected
    _, launched, _ = await poll(launch, unique, body, "/4.0/launch")
    assert launched["mlutp_orders_state"]["policy_versions"] == expected


async def test_a_poll_is_told_only_the_versions_it_did_not_name_all_when_it_named_none(
    orders_state: TestClient, launch: TestClient, unique: str
):
    taxi, eats = POLICY.version("taxi"), POLICY.version("eats")
    asked: dict[str, Any] = {"supported_services": ["taxi", "eats"]}
    _, polled, _ = await poll(orders_state, unique, asked)
    assert polled["policy_versions"] == {"taxi": taxi, "eats": eats}
    # a client that holds the right versions is not sent them again on every poll
    held = {**asked, "policy_versions": {"taxi": taxi, "eats": eats}}
    _, polled, _ = await poll(orders_state, unique, held)
    assert polled["policy_versions"] == {}
    # a service it did not name, or named at a version it is not to hold, is sent
    _, polled, _ = await poll(
        orders_state, unique, {**asked, "policy_versions": {"taxi": "0123456789"}}
    )
    assert polled["policy_versions"] == {"taxi": taxi, "eats": eats}
    _, polled, _ = await poll(orders_state, unique, {**asked, "policy_versions": {"taxi": taxi}})
    assert polled["policy_versions"] == {"eats": eats}
    # launch hands out every version it serves, beside their rules
    _, launched, _ = await poll(launch, unique, held, "/4.0/launch")
    assert launched["mlutp_orders_state"]["policy_versions"] == {"taxi": taxi, "eats": eats}


async def test_missing_tags_are_created_before_answering(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    redis_sync.delete(tags_key("taxi", orderid))  # expired
    await poll(orders_state, unique, {"supported_services": ["taxi"]})
    stored = stored_parts(redis_sync, tags_key("taxi", orderid))
    # every non-static part of every served version (the deprecated layout's `main` too)
    assert set(stored) == {"fast_info", "rarely_changed", "chat", "slow", "main"}


async def test_one_order_tags_call_per_poll_whatever_the_number_of_orders(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    ids = [await create_order_id(emulator, unique, service) for service in ("taxi", "taxi", "eats")]
    supported = {"supported_services": ["taxi", "eats"]}
    _, first, _ = await poll(orders_state, unique, supported)  # tags exist now, answers kept
    await orders_state.server.app[ENGINE].listings.drain()
    known = [{k: o[k] for k in ("orderid", "service", "status", "tags")} for o in first["orders"]]
    source_calls = (await stats(emulator))["calls"]
    redis_sync.config_resetstat()
    _, body, _ = await poll(orders_state, unique, {"known_orders": known, **supported})
    assert sorted(o["orderid"] for o in body["orders"]) == sorted(ids)
    commandstats = redis_sync.info("commandstats")
    # one command on a single Redis (a script, by its digest: its body is not sent each
    # time): the three orders' tags, and each list's tag (SET NX GET) and kept answer
    assert commandstats["cmdstat_evalsha"]["calls"] == 1
    assert commandstats["cmdstat_hgetall"]["calls"] == 3
    assert commandstats["cmdstat_set"]["calls"] == commandstats["cmdstat_get"]["calls"] == 2
    assert set(commandstats) <= {
        "cmdstat_hgetall",
        "cmdstat_evalsha",
        "cmdstat_set",
        "cmdstat_get",
        "cmdstat_info",
        "cmdstat_config|resetstat",
    }
    # and nothing new: no order source was asked
    after = (await stats(emulator))["calls"]
    assert {k: v for k, v in after.items() if k.startswith("source:")} == {
        k: v for k, v in source_calls.items() if k.startswith("source:")
    }


async def test_headers_are_forwarded_to_the_sources(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    headers = {
        "X-Yandex-UID": unique,
        "User-Agent": "app/5.0",
        "Accept-Language": "ru",
        "X-Request-Id": f"rid-{unique}",
    }
    await orders_state.post(
        "/mlutp/v1/orders/state", json={"supported_services": ["eats"]}, headers=headers
    )
    served = await stats(emulator)
    assert served["recent"]["source:eats"][-1]["headers"] == headers
    # another user (the first one's list is kept: its source would not be asked again)
    await orders_state.post(
        "/mlutp/v1/orders/state",
        json={"supported_services": ["eats"]},
        headers={"X-Yandex-UID": f"{unique}-2"},
    )
    served = await stats(emulator)
    assert len(served["recent"]["source:eats"][-1]["headers"]["X-Request-Id"]) == 32


async def test_no_active_orders_means_a_30_s_interval(orders_state: TestClient, unique: str):
    status, body, interval = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    assert status == 200 and body["orders"] == []
    assert interval == 30000
    assert body["allowed_changes"] == [{"service": "taxi", "can_make_more_orders": True}]


async def test_the_interval_is_the_minimum_over_the_orders(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, "taxi", status="transporting")
    await create_order_id(emulator, unique, "eats", status="cooking")
    _, _, interval = await poll(orders_state, unique, {"supported_services": ["taxi", "eats"]})
    assert interval == 5000


async def test_an_answer_the_client_holds_is_a_204_with_the_interval_and_no_body(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    body = {"supported_services": ["taxi"]}
    headers = {"X-Yandex-UID": unique}
    first = await orders_state.post("/mlutp/v1/orders/state", json=body, headers=headers)
    answered = await first.json()
    held = answered["answer_tag"]
    # a digest of the rest of the answer: short, URL-safe
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", held)
    again = await orders_state.post(
        "/mlutp/v1/orders/state", json={**body, "answer_tag": held}, headers=headers
    )
    assert again.status == 204 and await again.read() == b""
    assert int(again.headers["X-Yataxi-Polling-Interval-Ms"]) > 0
    # the order moves on: the answer differs, and comes whole with a tag of its own
    await advance(emulator, "taxi", orderid)
    moved = await orders_state.post(
        "/mlutp/v1/orders/state", json={**body, "answer_tag": held}, headers=headers
    )
    assert moved.status == 200
    news = await moved.json()
    assert news["orders"][0]["status"] == "waiting" and news["answer_tag"] != held


async def test_no_etag_and_no_304_whatever_if_none_match_says(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """orders/state is a POST: RFC 9110 gives a false If-None-Match on it a 412, never a 304,
    and stock clients take a 304 for an error. The body's answer_tag alone decides."""
    await create_order_id(emulator, unique, status="driving")
    body = {"supported_services": ["taxi"]}
    headers = {"X-Yandex-UID": unique}
    first = await orders_state.post("/mlutp/v1/orders/state", json=body, headers=headers)
    assert first.status == 200 and "ETag" not in first.headers
    held = (await first.json())["answer_tag"]
    for if_none_match in (held, f'"{held}"', f'W/"{held}"', "*"):
        named = {**headers, "If-None-Match": if_none_match}
        without_tag = await orders_state.post("/mlutp/v1/orders/state", json=body, headers=named)
        assert without_tag.status == 200 and "ETag" not in without_tag.headers
        assert (await without_tag.json())["answer_tag"] == held
        with_tag = await orders_state.post(
            "/mlutp/v1/orders/state", json={**body, "answer_tag": held}, headers=named
        )
        assert with_tag.status == 204 and "ETag" not in with_tag.headers


async def test_a_waiting_poll_with_nothing_new_is_a_204_that_says_why_it_ended(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    body = {"supported_services": ["taxi"], "wait_ms": 1}
    headers = {"X-Yandex-UID": unique}
    first = await orders_state.post("/mlutp/v1/orders/state", json=body, headers=headers)
    held = (await first.json())["answer_tag"]
    again = await orders_state.post(
        "/mlutp/v1/orders/state", json={**body, "answer_tag": held}, headers=headers
    )
    assert again.status == 204 and await again.read() == b""
    assert again.headers["X-Mlutp-Wait"] and again.headers["X-Yataxi-Polling-Interval-Ms"]


async def test_an_answer_tag_past_its_bound_is_a_400_naming_it(
    orders_state: TestClient, unique: str
):
    body = {"supported_services": ["taxi"], "answer_tag": "a" * (MAX_ANSWER_TAG_LENGTH + 1)}
    headers = {"X-Yandex-UID": unique}
    answer = await orders_state.post("/mlutp/v1/orders/state", json=body, headers=headers)
    assert answer.status == 400
    error = await answer.json()
    assert error["code"] == "invalid_request" and "answer_tag" in error["message"]
    for not_a_string in (1, ["x"], {"x": 1}):
        body["answer_tag"] = not_a_string
        answer = await orders_state.post("/mlutp/v1/orders/state", json=body, headers=headers)
        assert answer.status == 400 and "answer_tag" in (await answer.json())["message"]
    # a tag of the bound's length, which no answer had: answered in full
    body["answer_tag"] = "a" * MAX_ANSWER_TAG_LENGTH
    answer = await orders_state.post("/mlutp/v1/orders/state", json=body, headers=headers)
    assert answer.status == 200 and (await answer.json())["answer_tag"]


async def test_launch_answers_always_carry_their_body_and_no_etag(launch: TestClient, unique: str):
    body = {"supported_services": ["taxi"]}
    headers = {"X-Yandex-UID": unique}
    first = await launch.post("/4.0/launch", json=body, headers=headers)
    assert first.status == 200 and "ETag" not in first.headers
    launched = await first.json()
    assert "answer_tag" not in launched["mlutp_orders_state"]
    # even naming its own answer's digest, in the body or in If-None-Match
    held = answer_tag(await first.read())
    for asked, extra in (({**body, "answer_tag": held}, {}), (body, {"If-None-Match": held})):
        again = await launch.post("/4.0/launch", json=asked, headers={**headers, **extra})
        assert again.status == 200 and "ETag" not in again.headers
        assert (await again.json())["mlutp_orders_state"]

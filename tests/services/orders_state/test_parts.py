"""The part endpoints against the real emulator and Redis (docs/protocol.md: Part endpoints)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import redis
from aiohttp.test_utils import TestClient

from emulator.work import answer_work, fields_work
from shared.protocol.tags import decode_tag
from shared.redis import list_key, tags_key
from tests.emulator_api import (
    ORDER_CORE,
    PART_UPSTREAMS,
    advance,
    calls,
    change,
    create_order_id,
    part_service,
    set_fault,
    stats,
    totw,
)
from tests.helpers import DEPRECATED_TAXI_VERSION, POLICY, MakeApp, poll
from tests.raw_http import raw_post

FAST = "/mlutp/v1/taxi/fast_info"
ROUTE = "/mlutp/v1/taxi/route"
MIN_TTL_S = 2.0  # the default min TTL, the test services' too


async def fetch(
    client: TestClient, user: str, url: str, body: dict[str, Any], **headers: str
) -> dict:
    resp = await client.post(url, json=body, headers={"X-Yandex-UID": user, **headers})
    assert resp.status == 200, await resp.text()
    result: dict = await resp.json()
    return result


async def test_a_part_is_exactly_its_fields_that_the_upstream_returned(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(
        emulator, unique, status="transporting"
    )  # no cancel_rules any more
    doc = await totw(emulator, unique, orderid)
    body = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    [part] = body["orders"]
    fields = POLICY.services["taxi"].rules[0].fields
    assert "cancel_rules" in fields and "cancel_rules" not in doc
    expected = {name: doc[name] for name in fields if name in doc}
    assert {k: v for k, v in part.items() if k not in ("orderid", "tag")} == expected
    assert "cancel_rules" not in part  # absent upstream: absent in the part ("delete it")
    assert "payment" not in part  # another part's field


async def test_the_new_tag_carries_the_stored_content_and_the_policy_version(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    body = await fetch(
        orders_state, unique, "/mlutp/v1/taxi/chat", {"orders": [{"orderid": orderid}]}
    )
    tag = decode_tag(body["orders"][0]["tag"])
    assert tag is not None
    assert tag.policy_version == POLICY.version("taxi")
    assert tag.content == redis_sync.hget(tags_key("taxi", orderid), "chat")
    # and the poll takes it as up to date
    _, state, _ = await poll(
        orders_state,
        unique,
        {
            "known_orders": [
                {
                    "orderid": orderid,
                    "service": "taxi",
                    "status": "searching",
                    "tags": {"chat": body["orders"][0]["tag"]},
                }
            ]
        },
    )
    assert "chat" not in state["orders"][0]["need_request"]


async def test_a_change_racing_the_fetch_is_never_lost(
    orders_state: TestClient,
    emulator: TestClient,
    unique: str,
    order_core_received: asyncio.Event,
):
    """The upstream reads the data, then the change lands (data, then tag), then the answer
    leaves. Since the content tag was read before the upstream call, the client holds old
    data under an old tag, so the next poll asks for the part again: one more fetch, and it
    ends with the new data. Reading the tag after the data would give old data a new tag."""
    orderid = await create_order_id(emulator, unique, status="driving")
    await set_fault(emulator, ORDER_CORE, "slow", 400)
    in_flight = asyncio.create_task(
        fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    )
    async with asyncio.timeout(5):
        await order_core_received.wait()
    changed = await change(emulator, "taxi", orderid, {"eta": {"minutes": 42}})
    first = (await in_flight)["orders"][0]
    await set_fault(emulator, ORDER_CORE, "ok")
    assert first["version"] < changed["version"]  # the answer was computed before the change

    known = {"orderid": orderid, "service": "taxi", "status": "driving", "force": True}
    _, state, _ = await poll(
        orders_state, unique, {"known_orders": [{**known, "tags": {"fast_info": first["tag"]}}]}
    )
    assert "fast_info" in state["orders"][0]["need_request"]
    answer = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    second = answer["orders"][0]
    assert second["version"] == changed["version"] and second["eta"] == {"minutes": 42}
    _, state, _ = await poll(
        orders_state, unique, {"known_orders": [{**known, "tags": {"fast_info": second["tag"]}}]}
    )
    assert "fast_info" not in state["orders"][0]["need_request"]


async def test_an_upstream_404_is_expired_without_a_retry(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    victim = await create_order_id(emulator, f"{unique}-a")
    before = await calls(emulator, ORDER_CORE)
    body = await fetch(
        orders_state, f"{unique}-b", FAST, {"orders": [{"orderid": victim}, {"orderid": "gone"}]}
    )
    assert body["orders"] == [
        {"orderid": victim, "error": {"update_status": "expired"}},
        {"orderid": "gone", "error": {"update_status": "expired"}},
    ]
    assert await calls(emulator, ORDER_CORE) - before == 2


async def test_upstream_5xx_and_down_are_retried_once_then_stale(
    make_orders_state: MakeApp, emulator: TestClient, unique: str
):
    # every request reaches the upstream: no recent fetch (a failed one included) answers it
    orders_state = await make_orders_state(protocol={"part_fetches": {"recent_memo_bytes": 0}})
    orderid = await create_order_id(emulator, unique)
    for mode in ("error500", "down"):
        await set_fault(emulator, ORDER_CORE, mode)
        before = await calls(emulator, ORDER_CORE)
        body = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
        assert body["orders"] == [{"orderid": orderid, "error": {"update_status": "stale"}}]
        assert await calls(emulator, ORDER_CORE) - before == 2, mode
    await set_fault(emulator, ORDER_CORE, "ok")
    body = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    assert body["orders"][0]["status"] == "searching"


async def test_eats_parts_come_from_eats_details(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique, "eats")
    before = await calls(emulator, "eats_details")
    body = await fetch(
        orders_state, unique, "/mlutp/v1/eats/full_info", {"orders": [{"orderid": orderid}]}
    )
    [part] = body["orders"]
    assert part["status"] == "created" and part["items"]
    assert decode_tag(part["tag"]).content == redis_sync.hget(
        tags_key("eats", orderid), "full_info"
    )  # type: ignore[union-attr]
    assert await calls(emulator, "eats_details") - before == 1


async def test_headers_body_fields_and_the_content_tag_reach_the_upstream_never_the_tag(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    first = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    client_tag = first["orders"][0]["tag"]
    request_fields = {
        "extend_freecars": True,
        "format_currency": True,
        "supported": ["feature1"],
        "position": {"point": [37.5, 55.7], "dx": 1009},
    }
    held = redis_sync.hget(tags_key("taxi", orderid), "fast_info")
    # the order moves on: the part the client holds is no longer current (one that is costs
    # no upstream call: it is answered `unchanged`)
    await advance(emulator, "taxi", orderid)
    headers = {"User-Agent": "app/1", "X-Request-Id": "r1", "Accept-Language": "en"}
    body = {**request_fields, "orders": [{"orderid": orderid, "tag": client_tag}]}
    await asyncio.sleep(MIN_TTL_S)  # past the recent memo: a call of its own
    await fetch(orders_state, unique, FAST, body, **headers)
    served = await stats(emulator)
    last = served["recent"][ORDER_CORE][-1]
    assert last["headers"] == {"X-Yandex-UID": unique, **headers}
    # the content tag the client holds for the part (the order_proc version), not its tag
    content = redis_sync.hget(tags_key("taxi", orderid), "fast_info")
    assert held is not None and held.startswith("v")
    assert content is not None and content.startswith("v") and content != held
    assert last["body"] == {
        **request_fields,
        "orderid": orderid,
        "tags": {"fast_info": held},
        # what order_tags held before the call: the answer is tagged with it
        "at_least": {"fast_info": content},
    }
    assert client_tag not in json.dumps(served["recent"][ORDER_CORE])


async def test_a_lagging_upstream_never_hands_out_old_data_under_a_new_tag(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    """A part is tagged with the content tag read before its upstream call. The call asks for
    data at least that new (`at_least`), so the order core on a read replica one version behind
    answers from the primary: the part's version is the one its tag says."""
    orderid = await create_order_id(emulator, unique, status="driving")
    changed = await change(emulator, "taxi", orderid, {"comment": "gate 3"})
    await set_fault(emulator, ORDER_CORE, "lagging")
    # the replica is behind: a call asking for no version gets the data before the change
    behind = await part_service(emulator, "order_core", unique, orderid)
    assert behind["version"] < changed["version"]
    body = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    [part] = body["orders"]
    stored = redis_sync.hget(tags_key("taxi", orderid), "fast_info")
    assert stored == f"v{changed['version']}"
    tag = decode_tag(part["tag"])
    assert tag is not None and tag.content == stored
    assert part["version"] == changed["version"]
    last = (await stats(emulator))["recent"][ORDER_CORE][-1]
    assert last["body"]["at_least"] == {"fast_info": stored}


async def test_the_order_source_is_told_the_known_orders_content_tags(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    [part] = (await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]}))["orders"]
    known = {"orderid": orderid, "service": "taxi", "status": "searching"}
    await poll(
        orders_state,
        unique,
        {"known_orders": [{**known, "tags": {"fast_info": part["tag"]}}]},
    )
    served = await stats(emulator)
    told = [
        c["body"] for c in served["recent"]["source:taxi"] if c["headers"]["X-Yandex-UID"] == unique
    ]
    content = redis_sync.hget(tags_key("taxi", orderid), "fast_info")
    assert told[-1]["orders"] == [{"orderid": orderid, "tags": {"fast_info": content}}]
    # and the user's list tag read before the call: the source serves data at least that new
    assert told[-1]["at_least"] == redis_sync.get(list_key("taxi", unique))
    assert part["tag"] not in json.dumps(told)


async def test_the_route_part_proxies_taxiroute(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    route_request = {"coordinates": [37.5, 55.7], "timestamp": "t", "use_history": True}
    body = await fetch(
        orders_state, unique, "/mlutp/v1/taxi/route", {"orderid": orderid, **route_request}
    )
    assert set(body) == {
        "orderid",
        "tag",
        "route",
        "driver_position",
        "distance_left_m",
        "time_left_s",
    }
    served = await stats(emulator)
    assert served["recent"]["taxiroute"][-1]["body"] == {
        "orderid": orderid,
        "coordinates": [37.5, 55.7],
        "timestamp": "t",
        "use_history": True,
    }
    other = await fetch(orders_state, f"{unique}-x", "/mlutp/v1/taxi/route", {"orderid": orderid})
    assert other == {"orderid": orderid, "error": {"update_status": "expired"}}


async def test_the_old_taxiroute_request_without_orderid_routes_the_newest_active_order(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    route_request = {"coordinates": [37.5, 55.7], "timestamp": "t", "use_history": True}
    resp = await orders_state.post(ROUTE, json=route_request, headers={"X-Yandex-UID": unique})
    assert resp.status == 404 and (await resp.json())["code"] == "no_active_order"
    orderid = await create_order_id(emulator, unique, status="driving")
    body = await fetch(orders_state, unique, ROUTE, route_request)
    assert body["orderid"] == orderid and "route" in body
    served = await stats(emulator)
    assert served["recent"]["taxiroute"][-1]["body"] == {"orderid": orderid, **route_request}
    # a second order: the old body, sent unchanged, routes the newest one (the order an old
    # single-order app shows)
    newest = await create_order_id(emulator, unique, status="driving")
    body = await fetch(orders_state, unique, ROUTE, route_request)
    assert body["orderid"] == newest and "route" in body
    served = await stats(emulator)
    assert served["recent"]["taxiroute"][-1]["body"] == {"orderid": newest, **route_request}


async def test_deprecated_version_urls_are_served_and_counted(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    body = await fetch(
        orders_state, unique, "/mlutp/v0/taxi/main", {"orders": [{"orderid": orderid}]}
    )
    [part] = body["orders"]
    assert part["status"] == "driving" and "payment" in part and "route_sharing_url" not in part
    assert decode_tag(part["tag"]).policy_version == DEPRECATED_TAXI_VERSION  # type: ignore[union-attr]
    metrics = await (await orders_state.get("/metrics")).text()
    assert (
        'mlutp_part_requests_total{part="main",'
        f'policy_version="{DEPRECATED_TAXI_VERSION}",service="taxi",stage="deprecated"}} 1.0'
    ) in metrics


async def test_an_old_client_polls_and_fetches_by_its_deprecated_parts(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    parts = {}
    for name in ("main", "static"):
        body = await fetch(
            orders_state, unique, f"/mlutp/v0/taxi/{name}", {"orders": [{"orderid": orderid}]}
        )
        parts[name] = body["orders"][0]["tag"]
    known = {
        "orderid": orderid,
        "service": "taxi",
        "status": "driving",
        "tags": parts,
        "force": True,
    }
    _, state, _ = await poll(orders_state, unique, {"known_orders": [known]})
    assert state["orders"][0]["need_request"] == []
    assert state["orders"][0]["tags"] == parts
    await change(emulator, "taxi", orderid, {"comment": "x"})
    _, state, _ = await poll(orders_state, unique, {"known_orders": [known]})
    assert state["orders"][0]["need_request"] == ["main"]
    metrics = await (await orders_state.get("/metrics")).text()
    assert (
        f'mlutp_poll_orders_total{{policy_version="{DEPRECATED_TAXI_VERSION}",service="taxi"}} 2.0'
        in metrics
    )


async def test_with_the_tag_cache_down_data_is_served_under_an_unknown_content_tag(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique)
    redis_sync.delete(tags_key("taxi", orderid))  # no content stored: as good as unknown
    body = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    tag = decode_tag(body["orders"][0]["tag"])
    assert tag is not None and tag.content is None
    assert body["orders"][0]["status"] == "searching"


async def test_the_legacy_endpoint_passes_totw_through(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique)
    resp = await orders_state.post(
        "/3.0/taxiontheway", json={"orderid": orderid}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 200
    assert await resp.json() == await totw(emulator, unique, orderid)
    resp = await orders_state.post(
        "/3.0/taxiontheway", json={"orderid": "nope"}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 404


async def test_part_requests_need_1_to_3_orders_a_user_and_json(
    orders_state: TestClient, unique: str
):
    for orders in ([], [{"orderid": f"o{i}"} for i in range(4)]):
        resp = await orders_state.post(
            FAST, json={"orders": orders}, headers={"X-Yandex-UID": unique}
        )
        assert resp.status == 400 and (await resp.json())["code"] == "bad_orders_count"
    for bad in (
        b"{oops",
        b"[]",
        b'{"orders": "x"}',
        b'{"orders": [{"orderid": 1}]}',
        b'{"orders": [{"orderid": "a"}, {"orderid": "a"}]}',
    ):
        headers = {"X-Yandex-UID": unique, "Content-Type": "application/json"}
        resp = await orders_state.post(FAST, data=bad, headers=headers)
        assert resp.status == 400, bad
        assert set(await resp.json()) == {"code", "message"}
    resp = await orders_state.post(FAST, json={"orders": [{"orderid": "a"}]})
    assert resp.status == 401
    resp = await orders_state.post("/3.0/taxiontheway", json={"orderid": "a"})
    assert resp.status == 401


async def test_each_taxi_part_is_fetched_from_its_own_service_for_the_work_of_its_fields(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """docs/protocol.md: Part endpoints, stage 4: every taxi part from its own service. A
    part fetch calls only its own service, once, and costs the work of its own fields; none
    calls totw, whose document costs the work of every field."""
    orderid = await create_order_id(emulator, unique, status="driving")
    before = await stats(emulator)
    names = list(PART_UPSTREAMS)
    answers = await asyncio.gather(
        *(
            fetch(
                orders_state, unique, f"/mlutp/v1/taxi/{name}", {"orders": [{"orderid": orderid}]}
            )
            for name in names
        )
    )
    after = await stats(emulator)

    def made(counter: str, target: str) -> int:
        return int(after[counter].get(target, 0) - before[counter].get(target, 0))

    assert made("calls", "totw") == 0
    for name, answer in zip(names, answers, strict=True):
        [part] = answer["orders"]
        rule = next(r for r in POLICY.services["taxi"].rules if r.part_name == name)
        assert set(part) - {"orderid", "tag"} <= set(rule.fields) and len(part) > 2
        assert made("calls", PART_UPSTREAMS[name]) == 1, name
        assert made("work", PART_UPSTREAMS[name]) == fields_work(set(part) - {"tag"}), name
    legacy = await totw(emulator, unique, orderid)
    assert sum(made("work", target) for target in PART_UPSTREAMS.values()) < answer_work(legacy)


async def test_a_part_services_fault_fails_only_its_own_part(
    make_orders_state: MakeApp, emulator: TestClient, unique: str
):
    """docs/protocol.md: Part endpoints, stage 4: each taxi part's upstream is a service of
    its own, with its own faults: one down fails its part alone."""
    # every request reaches the upstreams: no recent fetch answers it
    orders_state = await make_orders_state(protocol={"part_fetches": {"recent_memo_bytes": 0}})
    orderid = await create_order_id(emulator, unique, status="driving")
    for failing, upstream in PART_UPSTREAMS.items():
        await set_fault(emulator, upstream, "error500")
        try:
            for name in PART_UPSTREAMS:
                answer = await fetch(
                    orders_state,
                    unique,
                    f"/mlutp/v1/taxi/{name}",
                    {"orders": [{"orderid": orderid}]},
                )
                [part] = answer["orders"]
                if name == failing:
                    assert part == {"orderid": orderid, "error": {"update_status": "stale"}}
                else:
                    assert "error" not in part and len(part) > 2, (failing, name)
        finally:
            await set_fault(emulator, upstream, "ok")


async def test_parts_of_one_document_fetched_together_cost_the_upstream_one_call(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """Parts served from one upstream document (the deprecated layout's, both from totw)
    share one call when fetched together."""
    orderid = await create_order_id(emulator, unique, status="driving")
    await set_fault(emulator, "totw", "slow", 200)
    try:
        before = await calls(emulator, "totw")
        answers = await asyncio.gather(
            *(
                fetch(
                    orders_state,
                    unique,
                    f"/mlutp/v0/taxi/{name}",
                    {"orders": [{"orderid": orderid}]},
                )
                for name in ("main", "static")
            )
        )
        assert await calls(emulator, "totw") - before == 1
    finally:
        await set_fault(emulator, "totw", "ok")
    for answer in answers:
        [part] = answer["orders"]
        assert len(part) > 2 and decode_tag(part["tag"]) is not None


async def test_fetches_of_different_users_are_never_shared(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    await set_fault(emulator, ORDER_CORE, "slow", 200)
    body = {"orders": [{"orderid": orderid}]}
    mine, theirs = await asyncio.gather(
        fetch(orders_state, unique, FAST, body), fetch(orders_state, f"{unique}-x", FAST, body)
    )
    assert mine["orders"][0]["status"] == "driving"
    assert theirs["orders"] == [{"orderid": orderid, "error": {"update_status": "expired"}}]


async def test_a_client_forcing_and_fetching_as_fast_as_it_can_costs_one_call_per_min_ttl(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """Issue 13: one user forcing and fetching as fast as possible made 411 totw calls a
    second from one order. A repeat fetch of an order whose content tags have not changed is
    answered from the fetch made less than a min TTL before; a real change is fetched."""
    orderid = await create_order_id(emulator, unique, status="driving")
    # each part's own upstream
    before = {
        upstream: await calls(emulator, upstream)
        for upstream in (PART_UPSTREAMS["fast_info"], PART_UPSTREAMS["rarely_changed"])
    }
    started = time.monotonic()
    tags: dict[str, str] = {}
    rounds = 40
    for _ in range(rounds):
        known = {"orderid": orderid, "service": "taxi", "status": "driving", "force": True}
        await poll(orders_state, unique, {"known_orders": [{**known, "tags": tags}]})
        for name in ("fast_info", "rarely_changed"):
            body = await fetch(
                orders_state, unique, f"/mlutp/v1/taxi/{name}", {"orders": [{"orderid": orderid}]}
            )
            tags[name] = body["orders"][0]["tag"]
    elapsed_s = time.monotonic() - started
    for upstream, first in before.items():
        made = await calls(emulator, upstream) - first
        assert made <= 1 + int(elapsed_s / MIN_TTL_S), (upstream, made, elapsed_s, rounds)

    # a change (data, then tag) is fetched at once, however recent the last fetch
    changed = await change(emulator, "taxi", orderid, {"eta": {"minutes": 7}})
    body = await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    assert body["orders"][0]["version"] == changed["version"]
    metrics = await (await orders_state.get("/metrics")).text()
    assert 'mlutp_part_recent_memo_total{part="fast_info",service="taxi"}' in metrics


async def test_varying_what_the_answer_does_not_depend_on_buys_no_upstream_call(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """Issue 28: a dummy field, User-Agent or Accept-Language varied on every request took 60
    of 60 fetches to totw. The memo is keyed by the upstream, the order and the user."""
    orderid = await create_order_id(emulator, unique, status="driving")
    await fetch(orders_state, unique, FAST, {"orders": [{"orderid": orderid}]})
    before = await calls(emulator, ORDER_CORE)
    started = time.monotonic()
    for index in range(20):
        for body, headers in [
            ({"orders": [{"orderid": orderid}], "dummy": index}, {}),
            ({"orders": [{"orderid": orderid}]}, {"User-Agent": f"app/{index}"}),
            ({"orders": [{"orderid": orderid}]}, {"Accept-Language": f"x-{index}"}),
        ]:
            answer = await fetch(orders_state, unique, FAST, body, **headers)
            assert answer["orders"][0]["status"] == "driving"
    elapsed_s = time.monotonic() - started
    # at most one call per min TTL (the recent memo's life), not one per request
    assert await calls(emulator, ORDER_CORE) - before <= int(elapsed_s / MIN_TTL_S) + 1


async def test_a_forwarded_header_with_bytes_past_ascii_is_refused_never_altered(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    before = await calls(emulator, ORDER_CORE)
    for name in ("User-Agent", "Accept-Language", "X-Request-Id"):
        status, answer_headers, payload = await raw_post(
            orders_state,
            FAST,
            b'{"orders": [{"orderid": "%s"}]}' % orderid.encode(),
            {b"X-Yandex-UID": unique.encode(), name.encode(): b"app\xff\xfe/1"},
        )
        assert status == 400, name
        error = json.loads(payload)
        assert error["code"] == "bad_header" and name in error["message"]
        # the response's request id is one the server made, not the refused one
        assert b"\xff" not in answer_headers[b"x-request-id"]
    assert await calls(emulator, ORDER_CORE) == before


async def test_a_late_slow_part_upstream_holds_neither_fast_info_nor_the_poll(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """docs/protocol.md: each part's upstream is configuration; `slow` (orderperformerinfo)
    has its own, so a late one holds no other part and no poll."""
    orderid = await create_order_id(emulator, unique)
    one_order = {"orders": [{"orderid": orderid}]}
    await set_fault(emulator, "part:orderperformerinfo", "slow", 3000)
    try:
        slow = asyncio.create_task(fetch(orders_state, unique, "/mlutp/v1/taxi/slow", one_order))
        [fast_part] = (await fetch(orders_state, unique, FAST, one_order))["orders"]
        _, state, _ = await poll(orders_state, unique, {"supported_services": ["taxi"]})
        assert not slow.done()  # both answered while the slow part's upstream still holds
        [slow_part] = (await slow)["orders"]
    finally:
        await set_fault(emulator, "part:orderperformerinfo", "ok")
    assert "error" not in fast_part and fast_part["status"] == "searching"
    assert [o["update_status"] for o in state["orders"]] == ["actual"]
    assert slow_part["error"] == {"update_status": "stale"}  # past its upstream's timeout
    # the slow part's own upstream, not totw's (which served fast_info alone)
    served = await stats(emulator)
    assert orderid in [c["body"]["orderid"] for c in served["recent"]["part:orderperformerinfo"]]

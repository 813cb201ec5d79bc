"""The reference client end to end (docs/protocol.md: Writing a client; Feature data and user
changes)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from client.client import MlutpClient
from client.model import WAIT_HEADER, ClientOptions, Position
from client.route import route_interval_s
from client.store import known_orders
from client.transport import Replicas
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.policy import DEFAULT_POLICY_PATH
from shared.redis import tags_key
from tests.emulator_api import (
    PART_UPSTREAMS,
    advance,
    change,
    create_order_id,
    set_fault,
    set_taxi_parts_fault,
    stats,
    totw,
)
from tests.helpers import (
    bff_kwargs,
    cut,
    protocol_for_tests,
)


async def part_calls(emulator: TestClient) -> int:
    """Calls of the taxi parts' upstreams (each part's own service, and totw)."""
    served = (await stats(emulator))["calls"]
    calls: int = sum(served.get(target, 0) for target in ("totw", *PART_UPSTREAMS.values()))
    return calls


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
    await advance(emulator, "taxi", orderid)  # complete: shown until the user rates it
    await client.cycle()
    [view] = client.view()
    assert view.status == "complete"
    resp = await emulator.post(
        f"/emulator/v1/features/taxi/{orderid}/feedback",
        json={"rating": 5},
        headers={"X-Yandex-UID": unique},
    )
    assert resp.status == 200
    await client.cycle()
    assert client.view() == []  # rated: finished


async def test_an_unchanged_order_costs_one_poll_and_no_part_request(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    parts_before = client.stats.part_requests
    await client.cycle()
    assert client.stats.part_requests == parts_before


async def test_a_client_keeps_the_policy_versions_it_holds_when_a_poll_names_none(
    make_client: Callable[[str], MlutpClient],
    bff_urls: tuple[str, str],
    emulator: TestClient,
    unique: str,
):
    await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    held = dict(client.policy_versions)
    assert held
    # the server tells a client naming the right versions none of them (Policy changes)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{bff_urls[1]}/mlutp/v1/orders/state",
            json={"supported_services": list(held), "policy_versions": held},
            headers={"X-Yandex-UID": unique},
        ) as response,
    ):
        assert (await response.json())["policy_versions"] == {}
    requests = client.stats.requests
    await client.cycle()
    await client.cycle()
    assert client.stats.requests == requests + 2  # the polls alone: no launch again
    assert client.policy_versions == held


async def test_a_part_added_to_a_live_order_is_fetched_once_then_not_until_it_changes(
    make_client: Callable[[str], MlutpClient],
    emulator: TestClient,
    unique: str,
    redis_sync: redis.Redis,
):
    orderid = await create_order_id(emulator, unique, status="driving")
    # its tags were written before the policy had "chat": the order's hash lacks that part
    redis_sync.hdel(tags_key("taxi", orderid), "chat")
    client = make_client(unique)
    await client.launch()  # every part fetched once, chat included
    assert "chat" in redis_sync.hgetall(tags_key("taxi", orderid))
    parts_before, calls_before = client.stats.part_requests, await part_calls(emulator)
    chat_fetched_at = client.orders[0].parts["chat"].fetched_at
    for _ in range(3):  # no min TTL here: a part with no content would be needed every poll
        await client.cycle()
    assert client.stats.part_requests == parts_before
    assert await part_calls(emulator) == calls_before
    history = [{"from": "driver", "text": "at the gate"}]
    await change(emulator, "taxi", orderid, {"chathistory": history})
    await client.cycle()
    assert client.orders[0].parts["chat"].fetched_at > chat_fetched_at  # its data changed
    assert client.view()[0].data["chathistory"] == history


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
    assert known_orders(client.orders)[0].get("force") is None  # no force once seen


# the source is asked on every poll (list tags off): the test is about a source that fails
# when asked, and with list tags an unchanged list is not asked at all
@pytest.mark.parametrize("protocol", [protocol_for_tests(min_ttl_s=0, list_tags=False)])
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
    assert eats_view.change_capabilities["cancel"] == {"allowed": True}  # created: may cancel
    assert stale.change_capabilities["cancel"] == {
        "allowed": False,
        "reason": "service_unavailable",
    }
    await set_fault(emulator, "source:eats", "ok")
    await client.cycle()
    assert [(v.service, v.orderid) for v in client.view()] == shown
    assert {v.update_status for v in client.view()} == {"actual"}
    assert not any(v.loading for v in client.view())
    back = next(v for v in client.view() if v.service == "eats")
    assert back.change_capabilities == eats_view.change_capabilities


async def test_the_client_echoes_the_version_of_each_order_it_got_actual_also_while_stale(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, "eats")
    client = make_client(unique)
    await client.launch()
    changed = await advance(emulator, "eats", orderid)
    await client.cycle()
    [known] = known_orders(client.orders)
    assert known["version"] == changed["version"]
    await set_fault(emulator, "source:eats", "down")
    await advance(emulator, "eats", orderid)  # its list changed: the source is asked, and down
    await client.cycle()
    assert client.view()[0].update_status == "stale"
    [known] = known_orders(client.orders)
    assert known["version"] == changed["version"]


async def test_part_errors_mark_fields_stale_then_recover(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    await set_taxi_parts_fault(emulator, "error500")
    await change(emulator, "taxi", orderid, {"comment": "new"})
    await client.cycle()
    [view] = client.view()
    assert {"comment", "payment", "status_info", "driver"} <= view.stale_fields
    assert view.data.get("comment") == ""  # the old value, flagged
    await set_taxi_parts_fault(emulator, "ok")
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
    await client._fetch_parts({("taxi", client.orders[0].orderid): ["fast_info"]}, set())
    assert client.orders == []


def moved_tips_policy() -> dict[str, Any]:
    """The default policy with `tips` moved from rarely_changed to fast_info (fetched from
    totw), the taxi parts on new URLs, and the layout before it kept as deprecated (still
    served to old clients)."""
    data: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    taxi = data["services"]["taxi"]
    taxi["deprecated"] = [{"rules": copy.deepcopy(taxi["rules"])}, *taxi.get("deprecated", [])]
    for rule in taxi["rules"]:
        rule["url"] = rule["url"].replace("/mlutp/v1/", "/mlutp/v2/")
        if rule["part_name"] == "rarely_changed":
            rule["fields"].remove("tips")
        if rule["part_name"] == "fast_info":
            rule["fields"].append("tips")
            # the order core does not build tips: the part takes them from totw's document
            del rule["upstream"]
    return data


async def test_a_policy_change_reaches_a_running_client_within_one_poll(
    make_client: Callable[[str], MlutpClient],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
    emulator: TestClient,
    unique: str,
    tmp_path: Path,
):
    orderid = await create_order_id(emulator, unique, status="driving")
    await change(emulator, "taxi", orderid, {"tips": {"value": 10}})
    client = make_client(unique)
    await client.launch()
    old_version = client.policy_versions["taxi"]
    old_fast_info = client.orders[0].parts["fast_info"].tag
    # orders_state and launch restart with the new policy, behind the same addresses
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(yaml.safe_dump(moved_tips_policy()))
    kwargs = bff_kwargs(
        order_tags_server, emulator_server, protocol_for_tests(min_ttl_s=0, policy_path=policy_path)
    )
    state = await aiohttp_server(create_orders_state(OrdersStateSettings(**kwargs)))
    launch = await aiohttp_server(create_launch(LaunchSettings(**kwargs)))
    client.point_at(str(launch.make_url("/4.0/launch")), str(state.make_url("")))
    parts_before = client.stats.part_requests

    await client.cycle()  # the answer names another version: launch again, every part anew
    assert client.policy_versions["taxi"] != old_version
    assert {rule.url.split("/")[2] for rule in client.rules["taxi"]} == {"v2"}
    tag_defined = [rule for rule in client.rules["taxi"] if rule.tag_defined]
    # each part once: the required one inline in the launch answer, the others by request
    by_request = [rule for rule in tag_defined if not rule.required]
    assert client.stats.part_requests - parts_before == len(by_request)
    [view] = client.view()
    assert view.data == cut(await totw(emulator, unique, orderid))
    assert view.data["tips"] == {"value": 10}  # now from fast_info
    await client.cycle()
    assert client.stats.part_requests - parts_before == len(by_request)  # and not again
    assert client.stats.errors == 0
    # an old client's endpoint is still served, with its old tag
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            str(state.make_url("/mlutp/v1/taxi/fast_info")),
            json={"orders": [{"orderid": orderid, "tag": old_fast_info}]},
            headers={"X-Yandex-UID": unique},
        ) as resp,
    ):
        assert resp.status == 200
        [part] = (await resp.json())["orders"]
    assert part["orderid"] == orderid and "tips" not in part  # the old layout, as it was


def test_the_route_is_polled_often_when_the_car_is_close_and_rarely_when_far():
    options = ClientOptions()
    assert route_interval_s(200, options) == 2.0
    assert route_interval_s(1_500, options) == 5.0
    assert route_interval_s(8_000, options) == 10.0
    assert route_interval_s(50_000, options) == 20.0
    assert route_interval_s(None, options) == 2.0  # no route yet: as often as the closest


async def test_the_route_goes_out_with_the_apps_position_and_time_by_its_own_rule(
    make_client: Callable[..., MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(unique, ClientOptions(backoff_base_s=0))  # polls the route
    client.position = Position((37.61, 55.75), 25)
    await client.launch()
    await client._poll_routes()
    served = await stats(emulator)
    sent = served["recent"]["taxiroute"][-1]["body"]
    assert sent["orderid"] == orderid and sent["coordinates"] == [37.61, 55.75]
    assert sent["use_history"] is True and sent["timestamp"]
    route = client.orders[0].parts["route"]
    assert isinstance(route.fields["distance_left_m"], int)  # what the next interval is by
    await client._poll_routes()  # not due yet: its interval has not passed
    assert (await stats(emulator))["calls"]["taxiroute"] == served["calls"]["taxiroute"]


async def test_a_user_change_shows_at_once_locked_and_unlocks_when_a_part_shows_it(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    assert await client.change("taxi", orderid, "comment", "gate 4")
    [view] = client.view()
    assert view.locked and view.data["comment"] == "gate 4"  # optimistic
    assert known_orders(client.orders)[0]["force"] is True
    await client.cycle()
    [view] = client.view()
    assert not view.locked and view.data["comment"] == "gate 4"
    assert client.change_results == [("taxi", orderid, "comment", "seen")]
    assert "force" not in known_orders(client.orders)[0]


async def test_two_devices_of_one_user_conflict_and_the_later_retries_once_after_catching_up(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    phone, tablet = make_client(unique), make_client(unique)
    await phone.launch()
    await tablet.launch()  # both hold the same version
    assert await phone.change("taxi", orderid, "comment", "from the phone")
    # the tablet's version is now stale: 409, it catches up (force), then retries once
    assert await tablet.change("taxi", orderid, "comment", "from the tablet")
    assert tablet.view()[0].locked
    await tablet.cycle()  # holds the phone's version now: the retry goes out
    await tablet.cycle()  # and is seen
    assert tablet.change_results == [("taxi", orderid, "comment", "seen")]
    assert tablet.view()[0].data["comment"] == "from the tablet"
    await phone.cycle()
    assert phone.view()[0].data["comment"] == "from the tablet"  # the later write, seen by both


async def test_a_change_not_seen_in_time_fails_if_versioned_and_is_retried_once_if_not(
    make_client: Callable[..., MlutpClient], emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(
        unique, ClientOptions(backoff_base_s=0, poll_route=False, change_deadline_s=0)
    )
    await client.launch()
    await set_taxi_parts_fault(emulator, "down")  # no part can show the change
    assert await client.change("taxi", orderid, "comment", "unseen")
    await client.cycle()
    assert client.change_results == [("taxi", orderid, "comment", "failed")]
    assert not client.view()[0].locked and "force" not in known_orders(client.orders)[0]
    assert await client.change("taxi", orderid, "tips", {"value": 30})
    await client.cycle()  # past the deadline: the same request again, once
    assert client.view()[0].locked
    await client.cycle()  # past it again: released
    assert client.change_results[-1] == ("taxi", orderid, "tips", "failed")
    assert not client.view()[0].locked
    # sent twice with one idempotency key: the tips changed once
    changes = (await emulator.get("/emulator/v1/changes")).json()
    tips_changes = [
        c
        for c in (await changes)["changes"]
        if c["orderid"] == orderid and "tips" in c["fields"] and not c["created"]
    ]
    assert len(tips_changes) == 1
    await set_taxi_parts_fault(emulator, "ok")
    assert (await totw(emulator, unique, orderid))["tips"] == {"value": 30}


async def test_with_extended_order_info_every_order_renders_from_the_launch_alone(
    make_client: Callable[..., MlutpClient], emulator: TestClient, unique: str
):
    for service in ("taxi", "eats"):
        await create_order_id(emulator, unique, service)
    # parts by request switched off: whatever renders came in the launch answer
    client = make_client(unique, ClientOptions(parallel_requests=1, poll_route=False))
    client._fetch_parts = no_part_requests  # type: ignore[method-assign]
    await client.launch()
    views = client.view()
    assert len(views) == 2 and not any(view.loading for view in views)
    taxi = next(view for view in views if view.service == "taxi")
    assert taxi.data["status"] == taxi.status  # fast_info's fields are there


async def no_part_requests(needed: object, arrived: object) -> None:
    return None


async def test_the_client_polls_again_after_the_retry_after_of_a_503(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
):
    """Admission control (docs/protocol.md: Polling interval): a shed poll is a 503 with
    Retry-After, and the client comes back when it says, not at its 2 s fallback."""
    shed = 0

    async def overloaded(request: web.Request) -> web.Response:
        nonlocal shed
        shed += 1
        return web.json_response(
            {"code": "overloaded", "message": "busy"}, status=503, headers={"Retry-After": "7"}
        )

    app = web.Application()
    app.router.add_post("/mlutp/v1/orders/state", overloaded)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:
        client = MlutpClient(
            session,
            launch_url=str(server.make_url("/4.0/launch")),
            orders_state_url=str(server.make_url("")),
            user_id="shed-user",
        )
        assert await client._poll_state() is None
    assert shed == 1
    # Retry-After's 7 s and the random part of a second the client adds
    assert 7 <= client.interval_s < 8 and not client.poll_again_at_once


def test_replicas_are_taken_in_turn_and_one_that_refused_is_passed_over_for_a_while():
    replicas = Replicas(["http://a/", "http://b", "http://c"], down_s=60)
    assert [replicas.pick() for _ in range(6)] == ["http://a", "http://b", "http://c"] * 2
    replicas.failed("http://b")
    assert {replicas.pick() for _ in range(6)} == {"http://a", "http://c"}
    assert replicas.pick(avoid="http://a") == "http://c"
    for url in ("http://a", "http://c"):
        replicas.failed(url)
    # every one down: still asked in turn (the client has nowhere else to go)
    assert {replicas.pick() for _ in range(3)} == {"http://a", "http://b", "http://c"}
    single = Replicas("http://only")
    single.failed("http://only")  # one URL (a balancer's) is never passed over
    assert single.pick() == "http://only"


async def test_a_poll_with_nothing_new_is_answered_204_and_the_client_keeps_what_it_has(
    make_client: Callable[[str], MlutpClient], emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    client = make_client(unique)
    await client.launch()
    await client.cycle()  # the whole answer, its answer_tag kept
    received, errors = client.stats.bytes_received, client.stats.errors
    await client.cycle()  # sent with its answer_tag: the same answer is a 204
    assert client.stats.exchanges["/mlutp/v1/orders/state 204"] == 1
    assert client.stats.bytes_received == received
    assert client.stats.errors == errors
    [view] = client.view()
    assert view.status == "driving" and view.update_status == "actual"
    # the held answer is still the one sent back: nothing new again is a 204 again, the
    # same body sent as its digest (docs/protocol.md: The digest request)
    await client.cycle()
    assert client.stats.exchanges["/mlutp/v1/orders/state 204 digest"] == 1
    assert client.stats.digests == 1
    assert client.stats.exchanges["/mlutp/v1/orders/state 200"] == 1


async def test_after_an_expired_part_the_next_poll_waits_the_interval_not_at_once(
    make_client: Callable[..., MlutpClient], emulator: TestClient, unique: str
):
    """An order a part endpoint says is gone, though the poll listed it (a kept source answer
    that missed its end, until the source is asked anew): the client drops it and polls again
    at the interval, not at once; polling at once would spin on news, part, expired, news."""
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make_client(unique, ClientOptions(backoff_base_s=0, poll_route=False, wait_ms=1000))
    await client.launch()
    await advance(emulator, "taxi", orderid)  # a new status: news, and parts to fetch
    post = client.transport.post

    async def gone_parts(replicas: Any, path: str, body: dict[str, Any], **kwargs: Any) -> Any:
        reply = await post(replicas, path, body, **kwargs)
        if "orders/state" in path:
            # as a process with pub/sub answers it: news (this test's stack has none, and
            # answers `unavailable`, after which a client waits the interval anyway)
            return dataclasses.replace(reply, headers={**reply.headers, WAIT_HEADER: "news"})
        if "launch" in path:
            return reply
        gone = [
            {"orderid": o["orderid"], "error": {"update_status": "expired"}} for o in body["orders"]
        ]
        return dataclasses.replace(reply, body={"orders": gone})

    client.transport.post = gone_parts  # type: ignore[method-assign]
    await client.cycle()
    assert client.view() == []
    assert client.poll_again_at_once is False

"""List tags on real processes (docs/protocol.md: List tags; A just-created order the source
does not list yet): a poll with nothing new asks no order source, a change of what a source
lists is seen at once and wakes a held poll, a kept answer is read for its own user alone,
and with the tag store down every source is asked again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis, EmbeddedRedisCluster
from shared.redis import list_key, tags_key
from shared.web import METRICS
from tests.conftest import TEST_TOKEN
from tests.emulator_api import advance, create_order_id, set_fault, source_calls
from tests.helpers import (
    MakeApp,
    all_tags,
    answers_kept,
    cluster_client,
    cluster_settings,
    held,
    known_as_answered,
    poll,
    replicas_on,
    stack_on,
)

SUPPORTED = ["taxi", "eats", "grocery"]


async def test_polls_with_nothing_new_ask_no_order_source(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, "taxi", status="driving")
    await create_order_id(emulator, unique, "eats")
    _, first, _ = await poll(orders_state, unique, {"supported_services": SUPPORTED})
    await answers_kept(orders_state)
    before = await source_calls(emulator, unique)
    assert before == len(SUPPORTED)  # the first poll asked each source once
    body = {"known_orders": known_as_answered(first), "supported_services": SUPPORTED}
    for _ in range(5):
        status, answer, _ = await poll(orders_state, unique, body)
        assert status == 200
        assert [o["update_status"] for o in answer["orders"]] == ["actual", "actual"]
        assert answer["allowed_changes"] == first["allowed_changes"]
    assert await source_calls(emulator, unique) == before


def keep_calls(order_tags: TestServer, route: str) -> float:
    value = order_tags.app[METRICS].registry.get_sample_value(
        "http_requests_total", {"route": route, "method": "POST", "status": "200"}
    )
    return value or 0.0


async def test_the_answers_of_the_sources_a_poll_asked_are_kept_in_one_call(
    orders_state: TestClient, emulator: TestClient, order_tags_server: TestServer, unique: str
):
    await create_order_id(emulator, unique, "taxi", status="driving")
    before = keep_calls(order_tags_server, "/v1/lists/keep_many")
    _, first, _ = await poll(orders_state, unique, {"supported_services": SUPPORTED})
    await answers_kept(orders_state)
    assert await source_calls(emulator, unique) == len(SUPPORTED)
    assert keep_calls(order_tags_server, "/v1/lists/keep_many") == before + 1
    assert keep_calls(order_tags_server, "/v1/lists/keep") == 0
    # and each answer is kept: the next poll asks none
    body = {"known_orders": known_as_answered(first), "supported_services": SUPPORTED}
    status, _, _ = await poll(orders_state, unique, body)
    assert status == 200
    assert await source_calls(emulator, unique) == len(SUPPORTED)


async def test_a_status_change_is_seen_on_the_next_poll(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, "taxi", status="driving")
    _, first, _ = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    await answers_kept(orders_state)
    await advance(emulator, "taxi", orderid)  # waiting: the source bumps the list tag
    _, answer, _ = await poll(
        orders_state,
        unique,
        {"known_orders": known_as_answered(first), "supported_services": ["taxi"]},
    )
    [order] = answer["orders"]
    assert order["status"] == "waiting"


async def test_a_kept_answer_is_never_read_for_another_user(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    victim, other = f"{unique}-a", f"{unique}-b"
    await create_order_id(emulator, victim, "taxi", status="driving")
    _, answer, _ = await poll(orders_state, victim, {"supported_services": ["taxi"]})
    assert len(answer["orders"]) == 1
    await answers_kept(orders_state)
    _, answer, _ = await poll(orders_state, other, {"supported_services": ["taxi"]})
    assert answer["orders"] == []
    # the other user's own source was asked, not the victim's kept answer taken
    assert await source_calls(emulator, other) == 1


async def test_with_the_tag_store_down_every_poll_asks_the_sources(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    unique: str,
):
    settings = RedisSettings(url=own_redis.url, command_deadline_s=1.0, socket_timeout_s=1.0)
    emulator, client = await stack_on(aiohttp_client, aiohttp_server, settings)
    await create_order_id(emulator, unique, "taxi", status="driving")
    _, first, _ = await poll(client, unique, {"supported_services": ["taxi"]})
    await answers_kept(client)
    body = {"known_orders": known_as_answered(first), "supported_services": ["taxi"]}
    _, _, _ = await poll(client, unique, body)
    asked = await source_calls(emulator, unique)
    assert asked == 1  # the kept answer stood for the source
    own_redis.stop()
    for _ in range(3):
        status, answer, _ = await poll(client, unique, body)
        assert status == 200 and answer["orders"][0]["update_status"] == "actual"
    assert await source_calls(emulator, unique) == asked + 3


async def test_an_order_created_elsewhere_wakes_a_held_poll_within_a_second(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    redis_settings: RedisSettings,
    order_tags_server: TestServer,
    emulator: TestClient,
    emulator_server: TestServer,
    make_orders_state: MakeApp,
    redis_sync: redis.Redis,
    unique: str,
):
    client = await make_orders_state(redis=redis_settings)
    orderid = await create_order_id(emulator, unique, "taxi", status="driving")
    await poll(client, unique, {"supported_services": SUPPORTED})
    await answers_kept(client)
    # a client holding every part as stored: nothing new, so the poll is held
    tags = all_tags(redis_sync, orderid, age_ms=60_000)
    known = [{"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}]
    body = {"known_orders": known, "supported_services": SUPPORTED, "wait_ms": 20_000}
    waiting = asyncio.create_task(poll(client, unique, body))
    await held(client, waiting)
    started = time.monotonic()
    created = await create_order_id(emulator, unique, "eats")  # on another device
    _, answer, _ = await waiting
    assert time.monotonic() - started < 1.0
    assert created in [o["orderid"] for o in answer["orders"]]


async def tags_of_a_new_order(order_tags: TestServer, orderid: str, owner: str) -> None:
    """The order is made (its tags written, naming its user) and its source does not list
    it yet: a lagging source, as a real one can be for a moment after the creating call."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            str(order_tags.make_url("/v1/tags/set")),
            json={
                "service": "taxi",
                "orderid": orderid,
                "tags": {"fast_info": "v1"},
                "user_id": owner,
            },
            headers={"Authorization": f"Bearer {TEST_TOKEN}"},
        ) as resp,
    ):
        assert resp.status == 200


@pytest.mark.parametrize("grace_s", [10.0, 0.0])
async def test_a_just_created_order_the_source_does_not_list_yet_stays_for_the_grace(
    make_orders_state: MakeApp, order_tags_server: TestServer, unique: str, grace_s: float
):
    client = await make_orders_state(protocol={"created_grace_s": grace_s})
    orderid = f"{unique}-new"
    await tags_of_a_new_order(order_tags_server, orderid, owner=unique)
    known = {"orderid": orderid, "service": "taxi", "status": "searching", "tags": {}, "x": 1}
    _, answer, _ = await poll(client, unique, {"known_orders": [known]})
    if grace_s:
        [order] = answer["orders"]
        assert order["update_status"] == "stale" and order["x"] == 1
    else:
        assert answer["orders"] == []  # past the grace: finished
    # another user naming the id learns nothing: it is dropped as for any unknown id
    _, answer, _ = await poll(client, f"{unique}-other", {"known_orders": [known]})
    assert answer["orders"] == []


async def test_on_a_cluster_list_channels_wake_polls_held_on_two_replicas(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    cluster: EmbeddedRedisCluster,
    unique: str,
):
    emulator, replicas = await replicas_on(
        aiohttp_client, aiohttp_server, cluster_settings(cluster), 2
    )
    sync = cluster_client(cluster)
    users = [f"{unique}-{i}" for i in range(6)]
    try:
        shards = {sync.get_node_from_key(list_key("eats", user)).name for user in users}
    finally:
        sync.close()
    assert len(shards) > 1  # the users' list channels are spread over the shards
    polls = []
    for index, user in enumerate(users):
        replica = replicas[index % len(replicas)]
        _, answer, _ = await poll(replica, user, {"supported_services": ["eats"]})
        assert answer["orders"] == []
        body = {"supported_services": ["eats"], "wait_ms": 20_000}
        polls.append((replica, asyncio.create_task(poll(replica, user, body))))
        await held(replica, polls[-1][1], index // len(replicas) + 1)
    for user in users:
        await create_order_id(emulator, user, "eats")  # elsewhere: the list channel wakes
    for _, task in polls:
        _, answer, _ = await task
        assert len(answer["orders"]) == 1


async def test_a_lagging_source_never_hides_a_just_created_order_past_its_grace(
    make_orders_state: MakeApp, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    """docs/protocol.md, List tags: a lagging source's answer is never kept. A replica that
    does not list the new order yet is used for that poll alone (the order stays, stale, for
    the grace); once the replica has caught up, the next poll asks it again and the order is
    actual. Its answer used to be kept under the list tag the creation had bumped, and stand
    for the source for list_max_age, longer than the grace: the order vanished."""
    client = await make_orders_state()
    # a replica a minute behind: it has none of this user's orders
    await set_fault(emulator, "source:taxi", "lagging", delay_ms=60_000)
    orderid = await create_order_id(emulator, unique, "taxi", status="driving")
    known = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": {}}
    body = {"known_orders": [known], "supported_services": ["taxi"]}
    _, answer, _ = await poll(client, unique, body)
    await answers_kept(client)
    [order] = answer["orders"]
    assert order["update_status"] == "stale"
    # the replica caught up
    await set_fault(emulator, "source:taxi", "ok")
    _, answer, _ = await poll(client, unique, body)
    [order] = answer["orders"]
    assert (order["orderid"], order["update_status"]) == (orderid, "actual")


async def test_a_lagging_source_does_not_keep_a_cancelled_order_listed(
    make_orders_state: MakeApp, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    """After a cancel a replica one version behind still lists the order: that poll shows it,
    but the answer is not kept, so the poll after the replica has caught up drops it (it
    used to stay actual for list_max_age); and the cancelled order's tags are not made again
    for a lagging answer (no owner, a day's TTL)."""
    client = await make_orders_state()
    orderid = await create_order_id(emulator, unique, "taxi", status="driving")
    body: dict[str, Any] = {"supported_services": ["taxi"]}
    _, answer, _ = await poll(client, unique, body)
    await answers_kept(client)
    body["known_orders"] = known_as_answered(answer)
    await set_fault(emulator, "source:taxi", "lagging")  # one list version behind
    resp = await emulator.post(
        f"/emulator/v1/features/taxi/{orderid}/cancel", json={}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 200, await resp.text()
    assert not redis_sync.exists(tags_key("taxi", orderid))
    _, answer, _ = await poll(client, unique, body)
    await answers_kept(client)
    assert [o["orderid"] for o in answer["orders"]] == [orderid]
    assert not redis_sync.exists(tags_key("taxi", orderid)), "tags made for a lagging answer"
    await set_fault(emulator, "source:taxi", "ok")
    _, answer, _ = await poll(client, unique, body)
    assert answer["orders"] == []


async def test_polls_of_one_user_in_flight_together_ask_each_source_once(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """docs/protocol.md, List tags: re-asks are coalesced per (user, service). Twenty polls of
    one user find no kept answer at once (a slow source keeps them in flight together): each
    source is asked once, and every poll gets its answer."""
    orderid = await create_order_id(emulator, unique, "taxi", status="driving")
    for service in SUPPORTED:
        await set_fault(emulator, f"source:{service}", "slow", delay_ms=600)
    body = {"supported_services": SUPPORTED}
    answers = await asyncio.gather(*(poll(orders_state, unique, body) for _ in range(20)))
    for status, answer, _ in answers:
        assert status == 200
        assert [o["orderid"] for o in answer["orders"]] == [orderid], answer
    assert await source_calls(emulator, unique) == len(SUPPORTED)
    # another user's polls are not joined with these
    other = f"{unique}-other"
    await asyncio.gather(*(poll(orders_state, other, body) for _ in range(3)))
    assert await source_calls(emulator, other) == len(SUPPORTED)

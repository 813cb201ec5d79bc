"""The waiting poll (docs/protocol.md: Waiting poll) on a real stack: Redis, order_tags, the
emulator and orders_state with its pub/sub connection. "Held" is awaited on the server's own count
of held polls, never guessed with a sleep; timings are asserted only as far as docs/protocol.md
names them."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from client.client import MlutpClient
from client.model import ClientOptions
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from shared.protocol.waiting import MAX_WAIT_MS
from shared.redis import tags_channel, tags_key
from tests.emulator_api import advance, change, create_order_id, stats
from tests.helpers import (
    STATE,
    MakeApp,
    all_tags,
    caught_up,
    client_tag,
    held,
    poll_order,
    stack_on,
)


async def test_a_tag_write_wakes_the_waiting_poll_with_the_changed_part(
    waiting_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    started = time.monotonic()
    waiting = asyncio.create_task(poll_order(waiting_state, unique, orderid, tags, wait_ms=20_000))
    await held(waiting_state, waiting)
    assert not waiting.done()
    await change(emulator, "taxi", orderid, {"comment": "by the gate"})
    order, headers = await waiting
    assert "rarely_changed" in order["need_request"]
    assert headers["X-Mlutp-Wait"] == "wakeup"
    assert time.monotonic() - started < 10  # woken, not timed out


async def test_a_burst_of_writes_to_an_order_comes_as_one_answer(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    # a settle window far longer than two back-to-back writes take, on any machine
    client = await make_waiting_state(waiting={"settle_s": 2.0})
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    waiting = asyncio.create_task(poll_order(client, unique, orderid, tags, wait_ms=20_000))
    await held(client, waiting)
    await change(emulator, "taxi", orderid, {"comment": "by the gate"})  # wakes the poll
    # the burst's second write comes a moment later: the spread of a burst is time itself
    await asyncio.sleep(0.3)
    assert not waiting.done()  # still settling
    history = [{"from": "driver", "text": "here"}]
    await change(emulator, "taxi", orderid, {"chathistory": history})  # within the window
    order, headers = await waiting
    assert headers["X-Mlutp-Wait"] == "wakeup"
    # one answer, so one round of part fetches for both writes
    assert order["need_request"] == ["fast_info", "rarely_changed", "chat"]


async def test_with_no_news_the_answer_comes_when_the_wait_ends(
    waiting_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    started = time.monotonic()
    await poll_order(waiting_state, unique, orderid, tags, wait_ms=400)
    # the client's first poll here: from half of wait_ms (polls that came together end apart)
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    order, headers = await poll_order(waiting_state, unique, orderid, tags, wait_ms=400)
    elapsed = time.monotonic() - started
    assert order["need_request"] == [] and order["status"] == "driving"
    assert order["update_status"] == "actual"
    assert headers["X-Mlutp-Wait"] == "timeout"
    assert elapsed >= 0.4  # wait_ms, plus at most wait_ms / 16 of jitter


@pytest.mark.parametrize(
    ("news", "known"),
    [
        ("a part to fetch", {"tags": {}}),
        ("another status", {"status": "searching"}),
    ],
)
async def test_a_poll_with_news_answers_at_once(
    waiting_state: TestClient,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
    news: str,
    known: dict[str, Any],
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    _, headers = await poll_order(
        waiting_state, unique, orderid, tags, known=known, wait_ms=MAX_WAIT_MS
    )
    assert headers["X-Mlutp-Wait"] == "news", news


async def test_a_finished_order_and_an_unlisted_one_are_news(
    waiting_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    gone = {"orderid": f"{unique}-gone", "service": "taxi", "status": "driving"}
    listed = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}
    body = {"known_orders": [listed, gone], "wait_ms": MAX_WAIT_MS}
    resp = await waiting_state.post(STATE, json=body, headers={"X-Yandex-UID": unique})
    assert resp.headers["X-Mlutp-Wait"] == "news"  # the gone order is left out: finished
    resp = await waiting_state.post(
        STATE,
        json={"supported_services": ["taxi"], "wait_ms": MAX_WAIT_MS},
        headers={"X-Yandex-UID": unique},
    )
    assert resp.headers["X-Mlutp-Wait"] == "news"  # an order the client did not list


async def test_a_lost_wake_up_costs_one_wait_never_the_change(
    make_waiting_state: MakeApp, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    # the watch cache off, so the re-poll after a wait looks (on, it sees the change at its
    # next full look: test_watch_cache.py)
    waiting_state = await make_waiting_state(watch_cache=False)
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    waiting = asyncio.create_task(poll_order(waiting_state, unique, orderid, tags, wait_ms=600))
    await held(waiting_state, waiting)
    # a write that publishes nothing: the wake-up is lost
    redis_sync.hset(tags_key("taxi", orderid), "chat", "changed-silently")
    order, headers = await waiting
    assert headers["X-Mlutp-Wait"] == "timeout"
    assert order["need_request"] == []  # the wait's answer is its last look
    # the next poll (the client sends it at once after a timeout) sees it by its tags
    order, headers = await poll_order(waiting_state, unique, orderid, tags, wait_ms=20_000)
    assert headers["X-Mlutp-Wait"] == "news"
    assert order["need_request"] == ["chat"]


async def test_killing_the_pub_sub_connection_answers_the_waiting_poll(
    waiting_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    started = time.monotonic()
    waiting = asyncio.create_task(poll_order(waiting_state, unique, orderid, tags, wait_ms=20_000))
    await held(waiting_state, waiting)
    redis_sync.client_kill_filter(_type="pubsub")
    order, headers = await waiting
    assert headers["X-Mlutp-Wait"] in ("unavailable", "timeout")
    assert time.monotonic() - started < 10
    # a change made while the connection was down is seen by the next poll's tags
    await change(emulator, "taxi", orderid, {"comment": "while nobody listened"})
    order, _ = await poll_order(waiting_state, unique, orderid, tags, wait_ms=20_000)
    assert "rarely_changed" in order["need_request"]


async def test_a_change_held_by_the_min_ttl_is_answered_once_the_ttl_has_passed(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    client = await make_waiting_state(protocol={"min_ttl_s": 1.0})
    orderid = await create_order_id(emulator, unique, status="driving")
    tags = all_tags(redis_sync, orderid, age_ms=60_000)
    tags["fast_info"] = client_tag("taxi", "an-older-content", age_ms=0)  # fetched just now
    started = time.monotonic()
    order, headers = await poll_order(client, unique, orderid, tags, wait_ms=20_000)
    assert order["need_request"] == ["fast_info"]
    assert headers["X-Mlutp-Wait"] == "wakeup"
    assert 1.0 <= time.monotonic() - started < 10
    # force skips the min TTL: news at once
    tags["fast_info"] = client_tag("taxi", "an-older-content", age_ms=0)
    order, headers = await poll_order(
        client, unique, orderid, tags, known={"force": True}, wait_ms=20_000
    )
    assert order["need_request"] == ["fast_info"] and headers["X-Mlutp-Wait"] == "news"


async def test_past_the_cap_a_poll_answers_at_once_with_a_longer_interval(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    client = await make_waiting_state(max_waiting=1)
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    _, plain = await poll_order(client, unique, orderid, tags)
    first = asyncio.create_task(poll_order(client, unique, orderid, tags, wait_ms=20_000))
    await held(client, first)
    _, headers = await poll_order(client, unique, orderid, tags, wait_ms=20_000)
    assert headers["X-Mlutp-Wait"] == "shed"
    interval = int(headers["X-Yataxi-Polling-Interval-Ms"])
    assert interval == 2 * int(plain["X-Yataxi-Polling-Interval-Ms"])
    await advance(emulator, "taxi", orderid)
    _, headers = await first
    assert headers["X-Mlutp-Wait"] == "wakeup"


async def test_with_the_tag_cache_down_a_poll_does_not_wait(
    waiting_state: TestClient,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
    order_tags_server: TestServer,
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    await order_tags_server.close()
    order, headers = await poll_order(waiting_state, unique, orderid, tags, wait_ms=20_000)
    assert headers["X-Mlutp-Wait"] == "unavailable"
    assert order["update_status"] == "actual"


async def test_without_redis_settings_polls_never_wait(
    make_waiting_state: MakeApp, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    client = await make_waiting_state(redis=RedisSettings())
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    _, headers = await poll_order(client, unique, orderid, tags, wait_ms=20_000)
    assert headers["X-Mlutp-Wait"] == "unavailable"


@pytest.mark.parametrize("wait_ms", [-1, MAX_WAIT_MS + 1, "5", 1.5])
async def test_a_wait_out_of_range_is_a_400(waiting_state: TestClient, unique: str, wait_ms):
    resp = await waiting_state.post(
        STATE, json={"wait_ms": wait_ms}, headers={"X-Yandex-UID": unique}
    )
    assert resp.status == 400
    assert (await resp.json())["code"] == "invalid_request"


async def test_launch_never_waits(launch: TestClient, emulator: TestClient, unique: str):
    await create_order_id(emulator, unique, status="driving")
    started = time.monotonic()
    resp = await launch.post(
        "/4.0/launch",
        json={"supported_services": ["taxi"], "wait_ms": 20_000},
        headers={"X-Yandex-UID": unique},
    )
    assert resp.status == 200 and "X-Mlutp-Wait" not in resp.headers
    assert time.monotonic() - started < 10


async def test_an_order_the_user_creates_is_polled_for_at_once_not_after_the_held_poll(
    waiting_state: TestClient, launch: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    seen: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
    async with aiohttp.ClientSession() as session:
        client = MlutpClient(
            session,
            launch_url=str(launch.make_url("/4.0/launch")),
            orders_state_url=str(waiting_state.make_url("")),
            user_id=unique,
            options=ClientOptions(poll_route=False, wait_ms=20_000),
            on_version_seen=lambda service, orderid, version, at: seen[orderid].set(),
        )
        stop = asyncio.Event()
        running = asyncio.create_task(client.run(stop))
        try:
            # launched, parts fetched: the client's poll has no news and is held
            await held(waiting_state, running)
            # a new order wakes no held poll (nobody listens on its channel); its app knows it
            created = await create_order_id(emulator, unique)
            client.order_created("taxi", created, "searching")
            async with asyncio.timeout(10):  # well before the held poll's 20 s wait ends
                await seen[created].wait()
            assert created in [view.orderid for view in client.view()]
        finally:
            stop.set()
            await running


async def test_redis_killed_mid_wait_answers_at_once(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    unique: str,
):
    own_settings = RedisSettings(url=own_redis.url, command_deadline_s=1.0)
    emulator, client = await stack_on(aiohttp_client, aiohttp_server, own_settings)
    own_sync = redis.Redis.from_url(own_redis.url, decode_responses=True)
    orderid, tags = await caught_up(emulator, own_sync, unique)
    own_sync.close()
    started = time.monotonic()
    waiting = asyncio.create_task(poll_order(client, unique, orderid, tags, wait_ms=20_000))
    await held(client, waiting)
    own_redis.stop()
    order, headers = await waiting
    assert headers["X-Mlutp-Wait"] == "unavailable"
    assert order["orderid"] == orderid
    assert time.monotonic() - started < 10


async def test_redis_killed_under_held_polls_costs_the_sources_nothing(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    unique: str,
):
    """docs/protocol.md, Waiting poll: polls held when the tag cache or pub/sub is lost are
    answered with their last look and no new one, so losing Redis costs the sources nothing
    in that instant (each woken poll used to look again, find the cache down and ask every
    source)."""
    own_settings = RedisSettings(url=own_redis.url, command_deadline_s=1.0)
    emulator, client = await stack_on(aiohttp_client, aiohttp_server, own_settings)
    own_sync = redis.Redis.from_url(own_redis.url, decode_responses=True)
    users = [f"{unique}-{index}" for index in range(12)]
    caught = [await caught_up(emulator, own_sync, user) for user in users]
    own_sync.close()
    services = ["taxi", "eats", "grocery"]
    waiting = [
        asyncio.create_task(
            poll_order(client, user, orderid, tags, wait_ms=20_000, supported_services=services)
        )
        for user, (orderid, tags) in zip(users, caught, strict=True)
    ]
    gathered = asyncio.gather(*waiting)
    await held(client, gathered, count=len(users))
    before = (await stats(emulator))["calls"]
    own_redis.stop()
    answers = await gathered
    after = (await stats(emulator))["calls"]
    for service in services:
        target = f"source:{service}"
        assert after.get(target, 0) == before.get(target, 0), target
    for (order, headers), (orderid, _) in zip(answers, caught, strict=True):
        assert headers["X-Mlutp-Wait"] == "unavailable"
        # the last look's answer: the order as it was, actual
        assert (order["orderid"], order["update_status"]) == (orderid, "actual")
        # degraded, and spread over the degraded TTL so the clients do not come back together
        assert int(headers["X-Yataxi-Polling-Interval-Ms"]) >= 3000 * 2 * 0.9


async def test_one_write_answers_every_poll_held_on_the_order_however_small_the_cap(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    # admission control admits 4 looks at a time; 20 polls are held on one order (its user's
    # own bound raised to let them)
    client = await make_waiting_state(
        protocol={"admission": {"min_polls_in_flight": 4}, "max_polls_in_flight": 4},
        waiting={"max_per_user": 20},
    )
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    polls = []
    for count in range(1, 21):
        polls.append(asyncio.create_task(poll_order(client, unique, orderid, tags, wait_ms=20_000)))
        await held(client, polls[-1], count)
    await change(emulator, "taxi", orderid, {"comment": "seen by all twenty"})
    # `state` asserts each answer is a 200: none is shed on its way out
    answers = await asyncio.gather(*polls)
    assert [headers["X-Mlutp-Wait"] for _, headers in answers] == ["wakeup"] * 20
    assert all("rarely_changed" in order["need_request"] for order, _ in answers)


async def test_one_user_cannot_take_the_whole_waiting_cap(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    client = await make_waiting_state(max_waiting=10, waiting={"max_per_user": 2})
    greedy, other = f"{unique}-greedy", f"{unique}-other"
    orderid, tags = await caught_up(emulator, redis_sync, greedy)
    other_orderid, other_tags = await caught_up(emulator, redis_sync, other)
    held_polls = [
        asyncio.create_task(poll_order(client, greedy, orderid, tags, wait_ms=20_000))
        for _ in range(2)
    ]
    await held(client, held_polls[-1], count=2)

    # the user's third poll is answered at once; another user's still waits
    _, headers = await poll_order(client, greedy, orderid, tags, wait_ms=20_000)
    assert headers["X-Mlutp-Wait"] == "shed"
    other_poll = asyncio.create_task(
        poll_order(client, other, other_orderid, other_tags, wait_ms=20_000)
    )
    await held(client, other_poll, count=3)

    await advance(emulator, "taxi", orderid)
    await advance(emulator, "taxi", other_orderid)
    for poll in [*held_polls, other_poll]:
        _, headers = await poll
        assert headers["X-Mlutp-Wait"] == "wakeup"


async def test_a_waiting_poll_listens_only_to_orders_the_source_lists_for_the_user(
    waiting_state: TestClient,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    owner, prober = f"{unique}-owner", f"{unique}-prober"
    orderid, tags = await caught_up(emulator, redis_sync, owner)
    channel = tags_channel("taxi", orderid)

    # another user names the order: it is not theirs, so the poll answers at once and Redis
    # holds no subscription to its channel
    known = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}
    resp = await waiting_state.post(
        STATE,
        json={"known_orders": [known], "wait_ms": 20_000},
        headers={"X-Yandex-UID": prober},
    )
    assert resp.status == 200 and resp.headers["X-Mlutp-Wait"] == "news"
    assert (await resp.json())["orders"] == []
    assert redis_sync.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 0

    # its owner's waiting poll listens, and a write wakes it
    waiting = asyncio.create_task(poll_order(waiting_state, owner, orderid, tags, wait_ms=20_000))
    await held(waiting_state, waiting)
    assert redis_sync.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1
    await advance(emulator, "taxi", orderid)
    _, headers = await waiting
    assert headers["X-Mlutp-Wait"] == "wakeup"

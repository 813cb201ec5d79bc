"""The watch cache (docs/protocol.md: Waiting poll; on by default) on a real stack: a waiting
re-poll that reaches the process of its client's last look, with nothing heard on its channels
since, is held from that look; a write heard, a full look's age, a service without list tags,
or order_tags unheard for a few seconds (stopped, its Redis up) makes it look."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import redis
import yaml
from aiohttp.test_utils import TestClient, TestServer

from shared.redis import tags_key
from shared.web import METRICS
from tests.emulator_api import advance, change, create_order_id, stats
from tests.helpers import STATE, MakeApp, caught_up, poll_order
from tests.told_metrics import ToldMetrics

POLICY = Path(__file__).resolve().parents[3] / "policy" / "polling_policy.yaml"


def cached_looks(client: TestClient) -> float:
    """The re-polls held from their client's last look (the watch cache), as /metrics says."""
    registry = client.app[METRICS].registry
    return registry.get_sample_value("mlutp_waiting_cached_looks_total") or 0.0


async def test_the_watch_cache_is_on_by_default_a_re_poll_while_nothing_changed_is_held(
    waiting_state: TestClient,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    # the first waiting poll subscribes its channels and looks; its answer is kept
    _, headers = await poll_order(waiting_state, unique, orderid, tags, wait_ms=300)
    assert headers["X-Mlutp-Wait"] == "timeout"
    before = cached_looks(waiting_state)
    order, headers = await poll_order(waiting_state, unique, orderid, tags, wait_ms=300)
    # what the client sees is the same answer
    assert headers["X-Mlutp-Wait"] == "timeout"
    assert order["need_request"] == [] and order["update_status"] == "actual"
    assert cached_looks(waiting_state) == before + 1


async def test_switched_off_every_waiting_re_poll_looks(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    client = await make_waiting_state(watch_cache=False)
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    for _ in range(2):
        _, headers = await poll_order(client, unique, orderid, tags, wait_ms=300)
        assert headers["X-Mlutp-Wait"] == "timeout"
    assert cached_looks(client) == 0


async def test_with_the_watch_cache_a_write_between_polls_makes_the_re_poll_look(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    waiting_state = await make_waiting_state(watch_cache=True)
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    _, headers = await poll_order(waiting_state, unique, orderid, tags, wait_ms=300)
    assert headers["X-Mlutp-Wait"] == "timeout"
    # no poll is held now, but the order's channel lingers subscribed: the write is heard
    heard = ToldMetrics(waiting_state)
    messages = heard.value("mlutp_wakeup_messages_total")
    await change(emulator, "taxi", orderid, {"comment": "by the gate"})
    await heard.until(lambda m: m.value("mlutp_wakeup_messages_total") > messages)
    before = cached_looks(waiting_state)
    order, headers = await poll_order(waiting_state, unique, orderid, tags, wait_ms=20_000)
    assert headers["X-Mlutp-Wait"] == "news"
    assert "rarely_changed" in order["need_request"]
    assert cached_looks(waiting_state) == before


async def test_with_the_watch_cache_a_full_look_comes_within_three_quarters_of_list_max_age(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    list_max_age_s = 2.0
    client = await make_waiting_state(protocol={"list_max_age_s": list_max_age_s}, watch_cache=True)
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    _, headers = await poll_order(client, unique, orderid, tags, wait_ms=300)
    assert headers["X-Mlutp-Wait"] == "timeout"
    # a write that publishes nothing, between polls: the wake-up is lost
    redis_sync.hset(tags_key("taxi", orderid), "chat", "changed-silently")
    written = time.monotonic()
    # re-polls are held from the last look while it is young; the first full look sees it
    for _ in range(20):
        order, headers = await poll_order(client, unique, orderid, tags, wait_ms=300)
        if headers["X-Mlutp-Wait"] == "news":
            break
    assert order["need_request"] == ["chat"]
    assert cached_looks(client) >= 1
    # 0.75 × list_max_age after the look, and the wait (with its extra) of the poll then held
    assert time.monotonic() - written < 0.75 * list_max_age_s + 0.3 * 17 / 16 + 1.0


async def test_a_service_without_list_tags_is_asked_on_every_waiting_re_poll(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
    tmp_path: Path,
):
    """A source without list tags has no tag to wake a poll: an order created on another
    device shows at the next poll, not at the cache's next full look."""
    policy: dict[str, Any] = yaml.safe_load(POLICY.read_text())
    policy["services"]["taxi"]["list_tags"] = False
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    client = await make_waiting_state(protocol={"policy_path": path}, watch_cache=True)
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    _, headers = await poll_order(client, unique, orderid, tags, wait_ms=300)
    assert headers["X-Mlutp-Wait"] == "timeout"
    # the user orders again on another device: this client's next poll is the same as its last
    created = await create_order_id(emulator, unique)
    known = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}
    started = time.monotonic()
    resp = await client.post(
        STATE,
        json={"known_orders": [known], "wait_ms": 5_000},
        headers={"X-Yandex-UID": unique},
    )
    assert resp.status == 200, await resp.text()
    assert resp.headers["X-Mlutp-Wait"] == "news"
    assert created in [o["orderid"] for o in (await resp.json())["orders"]]
    assert time.monotonic() - started < 2.5
    assert cached_looks(client) == 0


async def test_a_re_poll_echoing_another_version_is_not_held_from_the_last_look(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    redis_sync: redis.Redis,
    unique: str,
):
    """The look is checked against the echoed version (monotonic reads): one echoing a version
    the kept look was not checked against looks."""
    client = await make_waiting_state(watch_cache=True)
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    order, headers = await poll_order(client, unique, orderid, tags, wait_ms=300)
    assert headers["X-Mlutp-Wait"] == "timeout"
    # the client was shown a later version elsewhere (a part, another replica) than the
    # source lists now: a look answers the order stale with its echo, at once (a source
    # behind the client: the poll cannot wait); held from the kept look, it would be
    # answered actual at the older version when the wait ends
    ahead = {"version": 1_000}
    order, headers = await poll_order(client, unique, orderid, tags, wait_ms=5_000, known=ahead)
    assert headers["X-Mlutp-Wait"] == "unavailable"
    assert order["update_status"] == "stale"
    assert cached_looks(client) == 0


async def test_with_order_tags_stopped_and_redis_up_a_re_poll_looks_within_a_few_seconds(
    make_waiting_state: MakeApp,
    emulator: TestClient,
    order_tags_server: TestServer,
    redis_sync: redis.Redis,
    unique: str,
):
    """Held re-polls read no tags: with order_tags stopped and its Redis up no circuit opens
    and no wake-up comes (the writer's write fails), so a kept look holds only while the
    process heard order_tags lately. Past that a re-poll looks, its tag read fails, and it
    answers degraded with the source's status: within the bound and one wait, not at the
    next full look (0.75 × list_max_age)."""
    within_s, wait_ms = 3.0, 1_000
    client = await make_waiting_state(watch_cache=True, waiting={"tags_read_within_s": within_s})
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    _, headers = await poll_order(client, unique, orderid, tags, wait_ms=wait_ms)
    assert headers["X-Mlutp-Wait"] == "timeout"
    # caught up and waiting: the re-poll is held from the last look
    before = cached_looks(client)
    _, headers = await poll_order(client, unique, orderid, tags, wait_ms=wait_ms)
    assert headers["X-Mlutp-Wait"] == "timeout"
    assert cached_looks(client) == before + 1

    await order_tags_server.close()
    failures = (await stats(emulator))["tag_write_failures"]
    changed = await advance(emulator, "taxi", orderid)
    assert changed["status"] == "waiting"
    written = time.monotonic()
    causes = []
    while time.monotonic() - written < within_s + 2 * wait_ms / 1000 + 5.0:
        order, headers = await poll_order(client, unique, orderid, tags, wait_ms=wait_ms)
        causes.append(headers["X-Mlutp-Wait"])
        if order["status"] == "waiting":
            break
    seen_s = time.monotonic() - written
    # the source's status, degraded: the tag cache was found unavailable
    assert (order["status"], order["update_status"]) == ("waiting", "actual"), causes
    assert headers["X-Mlutp-Wait"] == "unavailable"
    # waiting's interval (3 s) doubled, as in any degraded answer
    assert headers["X-Yataxi-Polling-Interval-Ms"] == "6000"
    # the bound, the wait (with its extra) of a re-poll held just before it, a busy machine
    assert seen_s < within_s + wait_ms * 17 / 16 / 1000 + 1.0, (seen_s, causes)
    # the change reached no store, so it rang nothing
    assert (await stats(emulator))["tag_write_failures"] > failures

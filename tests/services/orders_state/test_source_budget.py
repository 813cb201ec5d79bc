"""The order-source budget on real processes (docs/protocol.md: A fleet, "The order-source
budget"): past its calls per source in any 5 s, the process's last answer of the user stands
in (its orders actual), or the source is unavailable for that poll; with the tag store down
or emptied, the sources get no more than the budget."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from shared.redis import kept_answer_key
from shared.web import METRICS
from tests.emulator_api import create_order_id, source_calls
from tests.helpers import answers_kept, known_as_answered, poll, replicas_on

TAXI = ["taxi"]


def over_budget(client: TestClient, outcome: str) -> float:
    value = client.server.app[METRICS].registry.get_sample_value(
        "mlutp_order_source_calls_total", {"service": "taxi", "outcome": outcome}
    )
    return value or 0.0


async def budgeted(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    replicas: int = 1,
) -> tuple[TestClient, list[TestClient]]:
    """The emulator and orders_state replicas on this Redis, each with a budget of one call
    per source in any 5 s."""
    settings = RedisSettings(url=own_redis.url, command_deadline_s=1.0, socket_timeout_s=1.0)
    return await replicas_on(
        aiohttp_client,
        aiohttp_server,
        settings,
        replicas,
        protocol={"source_calls_per_window": 1},
    )


async def looked_once(
    emulator: TestClient, client: TestClient, user: str
) -> tuple[dict[str, Any], float]:
    """A user with a driving taxi order, looked at once (its source asked, its answer kept):
    the body of a client holding that answer, and when the look began (the budget's window
    counts from it)."""
    await create_order_id(emulator, user, "taxi", status="driving")
    started = time.monotonic()
    _, first, _ = await poll(client, user, {"supported_services": TAXI})
    await answers_kept(client)
    return {"known_orders": known_as_answered(first), "supported_services": TAXI}, started


async def test_with_the_tag_store_down_the_sources_get_no_more_than_the_budget(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    unique: str,
):
    emulator, [client] = await budgeted(aiohttp_client, aiohttp_server, own_redis)
    body, started = await looked_once(emulator, client, unique)
    asked = await source_calls(emulator, unique)
    assert asked == 1
    own_redis.stop()
    for _ in range(3):
        status, answer, _ = await poll(client, unique, body)
        # the last answer stood in: the order is shown as the source gave it
        assert status == 200
        assert answer["orders"][0]["update_status"] == "actual"
        assert answer["orders"][0]["status"] == "driving"
    # every poll here would ask the source without a budget; with it, one call in any 5 s
    windows = 1 + int((time.monotonic() - started) // 5)
    assert await source_calls(emulator, unique) - asked < windows
    assert over_budget(client, "over_budget_last") >= 3 - windows


async def test_over_the_budget_with_no_last_answer_the_source_is_unavailable(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    unique: str,
):
    emulator, [client] = await budgeted(aiohttp_client, aiohttp_server, own_redis)
    first, second = f"{unique}-a", f"{unique}-b"
    for user in (first, second):
        await create_order_id(emulator, user, "taxi", status="driving")
    started = time.monotonic()
    await poll(client, first, {"supported_services": TAXI})
    status, answer, _ = await poll(client, second, {"supported_services": TAXI})
    if time.monotonic() - started >= 5:
        pytest.skip("the budget window passed between the polls (a stalled machine)")
    assert status == 200
    # the budget went to the first user's call: the second's source was not asked, and
    # this process never answered it: the service is unavailable for this poll
    assert await source_calls(emulator, second) == 0
    assert answer["orders"] == []
    [allowed] = answer["allowed_changes"]
    assert allowed["no_more_orders_reason"] == "service_unavailable"
    assert over_budget(client, "over_budget_unavailable") == 1


async def test_after_a_flush_the_last_answer_stands_in_and_is_not_kept(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    unique: str,
):
    emulator, [client] = await budgeted(aiohttp_client, aiohttp_server, own_redis)
    body, started = await looked_once(emulator, client, unique)
    store = redis.Redis.from_url(own_redis.url)
    try:
        store.flushall()
        status, answer, _ = await poll(client, unique, body)
        await answers_kept(client)
        if time.monotonic() - started >= 5:
            pytest.skip(
                "the budget window passed (a stalled machine): the source was rightly asked"
            )
        assert status == 200 and answer["orders"][0]["update_status"] == "actual"
        assert await source_calls(emulator, unique) == 1
        # the answer that stood in is shown, never kept: the next look in budget asks
        assert store.get(kept_answer_key("taxi", unique)) is None
    finally:
        store.close()


async def test_a_kept_answer_read_stands_in_with_the_tag_store_down(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
    unique: str,
):
    emulator, [asking, reading] = await budgeted(aiohttp_client, aiohttp_server, own_redis, 2)
    user, other = f"{unique}-a", f"{unique}-b"
    await create_order_id(emulator, other, "taxi", status="driving")
    # one replica asks the user's source and keeps its answer
    body, started = await looked_once(emulator, asking, user)
    # the other spends its budget on another user, then reads this user's kept answer
    await poll(reading, other, {"supported_services": TAXI})
    status, _, _ = await poll(reading, user, body)
    assert status == 200 and await source_calls(emulator, user) == 1
    own_redis.stop()
    status, answer, _ = await poll(reading, user, body)
    if time.monotonic() - started >= 5:
        pytest.skip("the budget window passed (a stalled machine): rightly asked")
    # the kept answer it read is its last answer of the user: it stands in, no call made
    assert status == 200 and answer["orders"][0]["update_status"] == "actual"
    assert await source_calls(emulator, user) == 1
    assert over_budget(reading, "over_budget_last") == 1

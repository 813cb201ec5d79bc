"""A waiting poll with nothing new looks once (docs/protocol.md: Waiting poll): at its wait's
end it answers with that look, whose tags were current, and the client polls again at once.
Run as processes, because the services run on uvloop: its timers may fire a little before their
moment by its own clock, which a wait's end must not take for "not yet" and look again
(a second tag read per idle client per wait)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import redis.asyncio as aioredis

from benchmarks.users import caught_up_users
from devtools.stack import STACK, Stack
from tests.stack_api import UID, metric, stack_env, stack_settings

USERS = 5
WAITS = 6


@pytest.fixture(params=[False, True], ids=["watch_cache_off", "watch_cache_on"])
async def stack(request: pytest.FixtureRequest) -> AsyncIterator[Stack]:
    services = [s for s in STACK if s.name in ("order_tags", "emulator", "orders_state")]
    # off, every wait looks once; on (the default), a re-poll with nothing heard since its
    # last look is held from it and reads nothing, unless its end is taken for "not yet"
    settings = stack_settings(orders_state={"watch_cache": request.param})
    stack = Stack(stack_env(EMULATOR_DRIVER_ENABLED="false"), services, settings=settings)
    try:
        await stack.start()
        yield stack
    finally:
        await stack.close()


async def test_a_waiting_poll_with_nothing_new_reads_the_tags_once(
    stack: Stack, session: aiohttp.ClientSession
):
    redis = aioredis.Redis.from_url(stack.env["REDIS_URL"], decode_responses=True)
    try:
        orders, bodies = await caught_up_users(
            session, stack.url("emulator"), redis, USERS, "looks"
        )
    finally:
        await redis.aclose()
    state = stack.url("orders_state")

    async def wait_once(user: str, body: dict[str, object]) -> None:
        async with session.post(
            f"{state}/mlutp/v1/orders/state",
            json={"known_orders": [body], "wait_ms": 150},
            headers={UID: user},
        ) as response:
            assert response.status == 200, await response.text()
            assert response.headers["X-Mlutp-Wait"] == "timeout"

    # each user's first wait subscribes its order's channel once the look has shown the order
    # is the user's, and looks once more: not counted
    for (user, _), body in zip(orders, bodies, strict=True):
        await wait_once(user, body)
    reads = await metric(session, state, "mlutp_tag_cache_calls_total", outcome="ok")
    for _ in range(WAITS):
        for (user, _), body in zip(orders, bodies, strict=True):
            await wait_once(user, body)
    after = await metric(session, state, "mlutp_tag_cache_calls_total", outcome="ok")
    watch_cache = stack.settings["orders_state"]["watch_cache"]
    assert after - reads == (0 if watch_cache else USERS * WAITS)

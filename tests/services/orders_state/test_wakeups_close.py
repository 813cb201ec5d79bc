"""Closing the wake-ups ends their pub/sub read loop, also when redis-py loses the loop's
cancellation: a cancel that meets a read's own timeout can come back from `get_message` as
"no message" (the read loop then read on, and a suite's teardown hung for its 300-s limit).
The loss is a race no real fault reproduces on demand, so redis-py's read is wrapped to lose
the cancellation once, each way it can go on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio.client import PubSub

from services.orders_state.waiting.metrics import WaitingMetrics
from services.orders_state.waiting.shard import WAKEUPS_CLIENT_NAME
from services.orders_state.waiting.wakeups import TagWakeups
from shared.config import RedisSettings
from shared.protocol.waiting import WakeupTimings
from shared.redis import create_redis

# far longer than the test waits: a read loop that lost its cancellation would read on
KEEPALIVE_S = 60.0


@pytest.mark.parametrize("after_loss", ["returns", "reads_on"])
async def test_closing_ends_a_read_that_lost_its_cancellation(
    redis_settings: RedisSettings, monkeypatch: pytest.MonkeyPatch, after_loss: str
) -> None:
    """`returns`: the read comes back as "no message"; `reads_on`: it reads again."""
    reading = asyncio.Event()
    swallowed = 0
    read = PubSub.get_message

    async def losing_cancellation(self: PubSub, *args: Any, **kwargs: Any) -> Any:
        nonlocal swallowed
        reading.set()
        try:
            return await read(self, *args, **kwargs)
        except asyncio.CancelledError:
            swallowed += 1
            if after_loss == "reads_on":
                return await read(self, *args, **kwargs)
            return None

    monkeypatch.setattr(PubSub, "get_message", losing_cancellation)
    wakeups = TagWakeups(
        create_redis(redis_settings, client_name=WAKEUPS_CLIENT_NAME, retry_lost_connection=False),
        redis_settings,
        WaitingMetrics(CollectorRegistry()),
        WakeupTimings(linger_s=1.0, keepalive_s=KEEPALIVE_S),
    )
    await wakeups.start()
    await reading.wait()
    closing = asyncio.create_task(wakeups.close())
    # not asyncio.timeout: a close that swallowed the test's own cancel would look done
    done, _ = await asyncio.wait({closing}, timeout=10)
    try:
        assert closing in done, "close() still waits on a read loop that lost its cancel"
        assert swallowed == 1
        assert not wakeups.available
    finally:
        closing.cancel()
        await wakeups.redis.aclose()

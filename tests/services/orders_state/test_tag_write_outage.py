"""A tag write is delivered at least once (docs/protocol.md: Feature data and user changes),
end to end on real processes: an order advances while the tag store is down (order_tags
stopped, or its Redis stopped with SIGSTOP); once the store is back, within the writer's retry
cap, a poll answers the new status, actual, and tells the client to fetch the part that holds
it. A writer that dropped its failed writes left the kept source answer (its list tag
unchanged) saying the old status, and the changed part's tag unchanged: never fetched."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer

from emulator.app import create_app as create_emulator
from emulator.keys import WORLD
from services.bff.resources import ENGINE
from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis, free_port
from shared.tag_outbox import BACKOFF_CAP_S
from shared.wire import ListKey, OrderKey
from tests.conftest import TEST_TOKEN, emulator_settings
from tests.emulator_api import advance, create_order_id, stats
from tests.helpers import all_tags, bff_kwargs, poll
from tests.told_outbox import drained

# the writer retries at least this often, so a kept write lands this long after the store is
# back at the latest; a poll and a busy machine's round trips on top
LANDS_WITHIN_S = BACKOFF_CAP_S + 5.0
TAXI = {"supported_services": ["taxi"]}


@dataclass
class Stack:
    own_redis: EmbeddedRedis
    tags_settings: OrderTagsSettings
    tags_port: int
    tags: TestServer
    emulator: TestClient
    orders_state: TestClient

    async def restart_order_tags(self) -> None:
        """order_tags again on its port (its Redis and what it holds untouched)."""
        self.tags = TestServer(create_order_tags(self.tags_settings), port=self.tags_port)
        await self.tags.start_server()

    @contextlib.asynccontextmanager
    async def outage(self, kind: str) -> AsyncIterator[None]:
        if kind == "order_tags_stopped":
            await self.tags.close()
            yield
            await self.restart_order_tags()
        else:
            self.own_redis.pause()
            try:
                yield
            finally:
                self.own_redis.resume()


@pytest.fixture
async def stack(
    aiohttp_client: Callable[..., Awaitable[TestClient]],
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    own_redis: EmbeddedRedis,
) -> AsyncIterator[Stack]:
    redis_settings = RedisSettings(url=own_redis.url)
    tags_settings = OrderTagsSettings(port=0, service_token=TEST_TOKEN, redis=redis_settings)
    port = free_port()
    tags = TestServer(create_order_tags(tags_settings), port=port)
    await tags.start_server()
    emulator_server = await aiohttp_server(create_emulator(emulator_settings(tags)))
    state_settings = OrdersStateSettings(
        **bff_kwargs(tags, emulator_server),
        redis=redis_settings,
        waiting={"subscribe_deadline_s": 5.0},
    )
    stack = Stack(
        own_redis,
        tags_settings,
        port,
        tags,
        await aiohttp_client(emulator_server),
        await aiohttp_client(create_orders_state(state_settings)),
    )
    yield stack
    await stack.tags.close()


def known(answer: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    """The poll of a client that holds the answer's order and has fetched its parts (these
    tags), echoing its version as clients do."""
    [order] = answer["orders"]
    fields = ("orderid", "service", "status", "version")
    held = {name: order[name] for name in fields if name in order}
    return {"known_orders": [{**held, "tags": tags}], **TAXI}


@pytest.mark.parametrize("outage", ["order_tags_stopped", "redis_paused"])
async def test_a_change_made_while_the_tag_store_is_down_is_seen_once_it_is_back(
    stack: Stack, unique: str, outage: str
):
    orderid = await create_order_id(stack.emulator, unique, "taxi", status="driving")
    _, first, _ = await poll(stack.orders_state, unique, TAXI)
    [order] = first["orders"]
    assert order["status"] == "driving"
    # the source's answer is kept under the list tag: a later poll reads it, not the source
    await stack.orders_state.server.app[ENGINE].listings.drain()
    with redis.Redis.from_url(stack.own_redis.url, decode_responses=True) as client:
        # fetched a while ago: past the min TTL that holds a fresh tag's refetch back
        fetched = known(first, all_tags(client, orderid, age_ms=60_000))
    _, caught_up, _ = await poll(stack.orders_state, unique, fetched)
    [order] = caught_up["orders"]
    assert (order["status"], order["need_request"]) == ("driving", [])
    failures_before = (await stats(stack.emulator))["tag_write_failures"]

    async with stack.outage(outage):
        changed = await advance(stack.emulator, "taxi", orderid)
        assert changed["status"] == "waiting"
        # kept in the world beside the data: the order's part write and the user's list bump
        outbox = stack.emulator.server.app[WORLD].outbox
        assert set(outbox.pending) == {OrderKey("taxi", orderid), ListKey("taxi", unique)}
        metrics = await (await stack.emulator.get("/metrics")).text()
        assert "mlutp_tag_writes_pending 2.0" in metrics
    # the outage did reach the writes: the store did not take them at once
    assert (await stats(stack.emulator))["tag_write_failures"] > failures_before

    # the world's outbox is the one the emulator's writer sends from
    await drained(outbox, LANDS_WITHIN_S)
    for _ in range(3):
        status, answer, _ = await poll(stack.orders_state, unique, fetched)
        assert status == 200
        [order] = answer["orders"]
        assert (order["status"], order["update_status"]) == ("waiting", "actual")
        # the status lives in fast_info: its tag changed, the client fetches it
        assert "fast_info" in order["need_request"]

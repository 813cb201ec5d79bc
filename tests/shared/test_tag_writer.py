"""The shared tag writer against a real order_tags on a Redis of the test's own (docs/protocol.md:
Feature data and user changes): a write the store did not take is kept and lands once the
store is back, a later write of the order never overtakes a kept one, writes pending together
are merged, a delete supersedes what the order had pending, a rejected write is not retried,
the outbox is bounded, and a writer restarted on its outbox sends what it holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from shared.order_tags_client import OrderTagsClient
from shared.protocol.tag_writes import ListWrite, OrderWrite
from shared.redis import list_key, tags_key
from shared.tag_outbox import Outbox, TagWriterSettings
from shared.tag_writer import TagWriter
from shared.web import METRICS
from shared.wire import ListKey, OrderKey
from tests.conftest import TEST_TOKEN
from tests.helpers import stored_parts
from tests.told_outbox import drained as outbox_drained

# retries close together: a test waits a cap at most once its store is back
SETTINGS = TagWriterSettings(backoff_base_s=0.02, backoff_cap_s=0.2)
# the longest a kept write takes to land once the store is back: a retry window, and the
# retry's own round trips on a busy machine
LANDS_WITHIN_S = SETTINGS.backoff_cap_s + 5.0
ORDER = OrderKey("eats", "o-1")


@pytest.fixture
async def tags_server(
    aiohttp_server: Callable[..., Awaitable[TestServer]], own_redis: EmbeddedRedis
) -> TestServer:
    redis_settings = RedisSettings(url=own_redis.url, command_deadline_s=0.5)
    settings = OrderTagsSettings(port=0, service_token=TEST_TOKEN, redis=redis_settings)
    return await aiohttp_server(create_order_tags(settings))


@pytest.fixture
async def store(tags_server: TestServer) -> AsyncIterator[OrderTagsClient]:
    client = OrderTagsClient(str(tags_server.make_url("")), TEST_TOKEN, deadline_s=1.0)
    yield client
    await client.close()


@pytest.fixture
async def writer(store: OrderTagsClient) -> AsyncIterator[TagWriter]:
    writer = TagWriter(store, Outbox(), SETTINGS, registry=CollectorRegistry())
    writer.start()
    yield writer
    await writer.close()


@pytest.fixture
def stored(own_redis: EmbeddedRedis) -> Callable[[OrderKey], dict[str, str]]:
    def read(key: OrderKey) -> dict[str, str]:
        with redis.Redis.from_url(own_redis.url, decode_responses=True) as client:
            return stored_parts(client, tags_key(key.service, key.orderid))

    return read


def landed_calls(server: TestServer, route: str) -> float:
    """The calls of this route order_tags answered 200."""
    value = server.app[METRICS].registry.get_sample_value(
        "http_requests_total", {"route": route, "method": "POST", "status": "200"}
    )
    return value or 0.0


async def drained(writer: TagWriter) -> None:
    await outbox_drained(writer.outbox, LANDS_WITHIN_S)


async def change_order(
    writer: TagWriter, key: OrderKey, write: OrderWrite
) -> dict[str, str] | None:
    """A writer's change of an order's data, as the emulator's features make it: its tag write
    recorded in the same step, then its inline attempt."""
    writer.record(key, write)
    return await writer.deliver_order(key)


async def change_list(writer: TagWriter, key: ListKey, write: ListWrite) -> bool:
    """A change of what a user's source lists: the list bump recorded, then attempted."""
    writer.record(key, write)
    return await writer.deliver_list(key)


async def test_a_write_the_store_takes_lands_inline(writer: TagWriter, stored):
    tags = await change_order(writer, ORDER, OrderWrite(sets={"full_info": "v1"}))
    assert tags == {"full_info": "v1"}
    # the caller answers after its tags are written: nothing left to retry
    assert stored(ORDER) == {"full_info": "v1"}
    assert writer.snapshot()["pending"] == 0 and writer.counts["retries"] == 0


async def test_a_write_the_store_did_not_take_lands_once_it_is_back(
    writer: TagWriter, own_redis: EmbeddedRedis, stored
):
    own_redis.stop()
    assert await change_order(writer, ORDER, OrderWrite(sets={"full_info": "v2"})) is None
    snapshot = writer.snapshot()
    assert snapshot["pending"] == 1 and snapshot["failures"] >= 1
    own_redis.start()
    await drained(writer)
    assert stored(ORDER) == {"full_info": "v2"}
    assert writer.counts["retries"] >= 1
    assert writer.snapshot()["given_up"] == {"rejected": 0, "superseded": 0, "full": 0}


async def test_a_later_write_never_overtakes_a_kept_one(
    writer: TagWriter, own_redis: EmbeddedRedis, stored
):
    own_redis.stop()
    await change_order(writer, ORDER, OrderWrite(sets={"full_info": "v1", "eta": "v1"}))
    # the data changed again: a bump of the part after the set that has not landed
    assert await change_order(writer, ORDER, OrderWrite(bumps=("full_info",))) is None
    own_redis.start()
    await drained(writer)
    tags = stored(ORDER)
    # the set first, then the bump: a tag never handed out with the older data
    assert tags["eta"] == "v1"
    assert tags["full_info"] not in ("", "v1")


async def test_writes_of_one_order_kept_together_land_as_one(
    writer: TagWriter, own_redis: EmbeddedRedis, tags_server: TestServer, stored
):
    own_redis.stop()
    for version in range(1, 6):
        await change_order(writer, ORDER, OrderWrite(sets={"full_info": f"v{version}"}))
        assert writer.snapshot()["pending"] == 1
    own_redis.start()
    await drained(writer)
    assert stored(ORDER) == {"full_info": "v5"}
    assert landed_calls(tags_server, "/v1/tags/set") == 1


async def test_concurrent_writes_of_one_order_land_in_the_order_they_were_made(
    writer: TagWriter, stored
):
    await asyncio.gather(
        *(change_order(writer, ORDER, OrderWrite(sets={"full_info": f"v{n}"})) for n in range(20))
    )
    assert stored(ORDER) == {"full_info": "v19"}


async def test_a_delete_supersedes_what_the_order_had_pending(
    writer: TagWriter, own_redis: EmbeddedRedis, tags_server: TestServer, stored
):
    own_redis.stop()
    await change_order(writer, ORDER, OrderWrite(bumps=("full_info",)))
    # the order finished: its tags go, and the bump kept for it is given up
    assert await change_order(writer, ORDER, OrderWrite(delete=True)) is None
    assert writer.snapshot()["given_up"]["superseded"] == 1
    own_redis.start()
    await drained(writer)
    assert stored(ORDER) == {}
    assert landed_calls(tags_server, "/v1/tags/bump") == 0
    assert landed_calls(tags_server, "/v1/tags/delete") == 1


async def test_a_rejected_write_is_given_up_and_the_rest_lands(writer: TagWriter, stored):
    too_many = {f"part_{n}": "v1" for n in range(40)}  # past the 32 parts of an order: a 400
    tags = await change_order(writer, ORDER, OrderWrite(sets=too_many, bumps=("eta",)))
    assert tags is not None and set(tags) == {"eta"}
    assert set(stored(ORDER)) == {"eta"}
    snapshot = writer.snapshot()
    assert snapshot["given_up"]["rejected"] == 1
    assert snapshot["pending"] == 0 and snapshot["retries"] == 0


async def test_past_max_pending_a_failing_write_is_given_up(
    store: OrderTagsClient, own_redis: EmbeddedRedis
):
    writer = TagWriter(store, Outbox(), SETTINGS.model_copy(update={"max_pending": 1}))
    own_redis.stop()
    await change_order(writer, OrderKey("eats", "first"), OrderWrite(bumps=("full_info",)))
    await change_order(writer, OrderKey("eats", "second"), OrderWrite(bumps=("full_info",)))
    snapshot = writer.snapshot()
    assert snapshot["pending"] == 1
    assert snapshot["given_up"]["full"] == 1
    # a write of an order already kept is merged into its one pending write: never refused
    await change_order(writer, OrderKey("eats", "first"), OrderWrite(bumps=("eta",)))
    assert writer.snapshot()["given_up"]["full"] == 1


async def test_a_writer_restarted_on_its_outbox_sends_what_it_holds(
    store: OrderTagsClient, own_redis: EmbeddedRedis, stored
):
    outbox = Outbox()
    first = TagWriter(store, outbox, SETTINGS)
    own_redis.stop()
    await change_order(first, ORDER, OrderWrite(sets={"full_info": "v7"}))
    await first.close()
    own_redis.start()
    second = TagWriter(store, outbox, SETTINGS)
    second.start()
    try:
        await drained(second)
    finally:
        await second.close()
    assert stored(ORDER) == {"full_info": "v7"}


async def test_a_kept_list_bump_lands_and_says_its_tag(writer: TagWriter, own_redis: EmbeddedRedis):
    key = ListKey("eats", "user-1")
    written: list[str] = []
    own_redis.stop()
    assert not await change_list(writer, key, ListWrite(on_written=written.append))
    # a second change of the list: one bump does for both, its tag for the newest version
    newest: list[str] = []
    assert not await change_list(writer, key, ListWrite(on_written=newest.append))
    own_redis.start()
    await drained(writer)
    with redis.Redis.from_url(own_redis.url, decode_responses=True) as client:
        assert newest == [client.get(list_key("eats", "user-1"))]
    assert written == []


async def test_what_is_pending_is_on_the_metrics(store: OrderTagsClient, own_redis: EmbeddedRedis):
    registry = CollectorRegistry()
    writer = TagWriter(store, Outbox(), SETTINGS, registry=registry)
    own_redis.stop()
    await change_order(writer, ORDER, OrderWrite(bumps=("full_info",)))
    assert registry.get_sample_value("mlutp_tag_writes_pending") == 1
    oldest = registry.get_sample_value("mlutp_tag_write_oldest_pending_seconds")
    assert oldest is not None and oldest > 0
    assert registry.get_sample_value("mlutp_tag_write_failures_total") == 1
    own_redis.start()
    writer.start()
    try:
        await drained(writer)
    finally:
        await writer.close()
    assert registry.get_sample_value("mlutp_tag_writes_pending") == 0
    assert registry.get_sample_value("mlutp_tag_write_oldest_pending_seconds") == 0
    assert (registry.get_sample_value("mlutp_tag_write_retries_total") or 0) >= 1


async def test_the_first_retry_comes_within_the_base_window(
    store: OrderTagsClient, own_redis: EmbeddedRedis
):
    writer = TagWriter(store, Outbox(), SETTINGS, draw=lambda: 1.0)
    own_redis.stop()
    before = asyncio.get_running_loop().time()
    await change_order(writer, ORDER, OrderWrite(bumps=("full_info",)))
    after = asyncio.get_running_loop().time()
    due = writer.outbox.pending[ORDER].due
    assert before + SETTINGS.backoff_base_s <= due <= after + SETTINGS.backoff_base_s
    own_redis.start()

"""docs/protocol.md: Waiting poll: order_tags publishes every tag write (set, bump, delete) on the
order's own channel, named like its key; a write that changes nothing wakes nobody."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient

from shared.embedded_redis import EmbeddedRedis
from shared.redis import tags_channel
from tests.services.order_tags.conftest import AUTH


@pytest.fixture
def listener(redis_server: EmbeddedRedis) -> Iterator[redis.client.PubSub]:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    yield pubsub
    pubsub.close()
    client.close()


async def next_message(pubsub: redis.client.PubSub) -> dict[str, Any]:
    async with asyncio.timeout(5):
        while True:
            message = await asyncio.to_thread(pubsub.get_sharded_message, timeout=1.0)
            if message is not None:
                return message


async def write(client: TestClient, path: str, body: dict[str, Any]) -> None:
    resp = await client.post(path, json=body, headers=AUTH)
    assert resp.status == 200, await resp.text()


async def test_set_bump_and_delete_publish_on_the_orders_channel(
    tags_client: TestClient, listener: redis.client.PubSub, unique: str
):
    order = {"service": "taxi", "orderid": unique}
    channel = tags_channel("taxi", unique)
    assert channel == f"tags:{{taxi:{unique}}}"
    listener.ssubscribe(channel)

    await write(tags_client, "/v1/tags/set", {**order, "tags": {"fast_info": "v1", "chat": "c1"}})
    message = await next_message(listener)
    assert message["channel"] == channel
    assert sorted(message["data"].split(",")) == ["chat", "fast_info"]

    await write(tags_client, "/v1/tags/bump", {**order, "parts": ["rarely_changed"]})
    assert (await next_message(listener))["data"] == "rarely_changed"

    await write(tags_client, "/v1/tags/delete", order)
    assert (await next_message(listener))["data"] == "*"


async def test_a_write_that_changes_nothing_publishes_nothing(
    tags_client: TestClient, listener: redis.client.PubSub, unique: str
):
    order = {"service": "taxi", "orderid": unique}
    listener.ssubscribe(tags_channel("taxi", unique))
    await write(tags_client, "/v1/tags/set", {**order, "tags": {"fast_info": "v1"}})
    assert (await next_message(listener))["data"] == "fast_info"
    # the same content again, and a create-if-absent of a part that exists: no change
    await write(tags_client, "/v1/tags/set", {**order, "tags": {"fast_info": "v1"}})
    await write(
        tags_client,
        "/v1/tags/set",
        {**order, "tags": {"fast_info": "v9"}, "only_if_absent": True},
    )
    await write(tags_client, "/v1/tags/set", {**order, "tags": {"chat": "c1"}})
    # the next message is the real change: the two writes before it published nothing
    assert (await next_message(listener))["data"] == "chat"

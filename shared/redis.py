"""The Redis client factory: redis-py asyncio with hiredis, explicit timeouts, no hidden retries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from shared.errors import StartupError

RedisClient = Redis | RedisCluster


def tags_key(service: str, orderid: str) -> str:
    """An order's content tags: `tags:{<service>:<orderid>}`. The braces make the pair a
    Redis Cluster hash tag: one order, one slot, and orders spread over every shard."""
    return f"tags:{{{service}:{orderid}}}"


def parts_key(service: str, orderid: str) -> str:
    """An order's part data kept by the shared part cache: `parts:{<service>:<orderid>}`, a
    hash of entries by user, part and request parameters, on the shard of the order's tags
    (one hash tag)."""
    return f"parts:{{{service}:{orderid}}}"


def tags_channel(service: str, orderid: str) -> str:
    """The channel order_tags publishes an order's tag writes on: the key's own name (channels
    are a namespace of their own), so on a cluster it is sharded pub/sub on the key's shard."""
    return tags_key(service, orderid)


def force_key(service: str, orderid: str, user_id: str | None = None) -> str:
    """How often a user's force of an order was counted in its current minute, by every
    replica: `force:{<service>:<orderid>}:<user_id>`, on the shard of the order's tags. Per
    user, so another user naming the order spends nothing of its owner's budget (without a
    user, `force:{<service>:<orderid>}`, the order's alone)."""
    key = f"force:{{{service}:{orderid}}}"
    return key if user_id is None else f"{key}:{user_id}"


def list_key(service: str, user_id: str) -> str:
    """A user's list tag for a service: `list:{<service>:<user_id>}`, a content tag of all the
    service's order source lists for the user. The braces make the pair a hash tag, so the
    list tag and the kept answer (`listed:`) are on one shard and read in one round trip."""
    return f"list:{{{service}:{user_id}}}"


def kept_answer_key(service: str, user_id: str) -> str:
    """The source's answer kept under its list tag, beside the list tag's key."""
    return f"listed:{{{service}:{user_id}}}"


def list_channel(service: str, user_id: str) -> str:
    """The channel order_tags publishes a list tag's bump on: its key's name (sharded)."""
    return list_key(service, user_id)


def _cluster_nodes(spec: str) -> list[ClusterNode]:
    nodes = []
    for item in spec.split(","):
        host, _, port = item.strip().rpartition(":")
        nodes.append(ClusterNode(host or "127.0.0.1", int(port)))
    return nodes


def create_redis(
    settings: RedisSettings,
    url: str | None = None,
    *,
    client_name: str | None = None,
    retry_lost_connection: bool = True,
    decode_responses: bool = True,
) -> RedisClient:
    """A client for `url`, or the settings' URL or cluster. The caller's deadline decides,
    and a dead Redis costs one fast failure, not a backoff loop: no retry on a timeout, and
    one at once on a lost connection, so that a pooled connection Redis closed (a restart,
    CLIENT KILL, an idle `timeout`) costs no request; on a Redis that is down the retry's
    connect is refused at once. `retry_lost_connection=False` for a pub/sub client whose
    owner reconnects and resubscribes itself. `client_name` names the connections in
    Redis's CLIENT LIST; `decode_responses=False` for a client of binary values."""
    common: dict[str, Any] = {
        "client_name": client_name,
        "socket_timeout": settings.socket_timeout_s,
        "socket_connect_timeout": settings.connect_timeout_s,
        "retry": Retry(NoBackoff(), 1 if retry_lost_connection else 0, (RedisConnectionError,)),
        "decode_responses": decode_responses,
        "health_check_interval": 0,
    }
    if url is None and settings.cluster_nodes:
        return RedisCluster(startup_nodes=_cluster_nodes(settings.cluster_nodes), **common)
    target = url or settings.url
    if target is None:
        raise ValueError("no Redis URL or cluster nodes configured")
    return Redis.from_url(target, **common)


@asynccontextmanager
async def redis_client(settings: RedisSettings) -> AsyncIterator[RedisClient]:
    """Open Redis for an app's lifetime; with nothing configured, start an embedded server."""
    embedded: EmbeddedRedis | None = None
    url = None
    if settings.url is None and settings.cluster_nodes is None:
        try:
            embedded = EmbeddedRedis()
        except RuntimeError as exc:
            # no redis-server (the services' image installs none): the message says what to set
            raise StartupError(str(exc)) from exc
        await asyncio.to_thread(embedded.start)
        url = embedded.url
    client = create_redis(settings, url)
    try:
        yield client
    finally:
        await client.aclose()
        if embedded is not None:
            await asyncio.to_thread(embedded.close)

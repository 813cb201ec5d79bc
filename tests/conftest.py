"""Fixtures that start real processes: a Redis per test session (never the machine's own),
and the project's apps on it. Everything started here is stopped here."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis

TEST_TOKEN = "test-token"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis()
    server.start()
    yield server
    server.close()


@pytest.fixture
def redis_sync(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def redis_settings(redis_server: EmbeddedRedis) -> RedisSettings:
    return RedisSettings(url=redis_server.url)


@pytest.fixture
def unique() -> str:
    """A fresh id prefix, so tests sharing the session's Redis never see each other's keys."""
    return uuid.uuid4().hex[:12]

"""orders_state on the session's Redis, its polls able to wait (the waiting poll's and the
watch cache's tests), and a three-master Redis Cluster for a test module of its own (the
waiting poll's and list tags' tests on a cluster): started once per module that asks for it,
stopped after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedisCluster
from tests.helpers import MakeApp


@pytest.fixture
def make_waiting_state(make_orders_state: MakeApp, redis_settings: RedisSettings) -> MakeApp:
    """orders_state on the session's Redis: its polls can wait."""

    async def make(**settings: Any) -> TestClient:
        return await make_orders_state(**{"redis": redis_settings, **settings})

    return make


@pytest.fixture
async def waiting_state(make_waiting_state: MakeApp) -> TestClient:
    return await make_waiting_state()


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedRedisCluster]:
    cluster = EmbeddedRedisCluster(masters=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()

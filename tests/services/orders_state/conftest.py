"""A three-master Redis Cluster for a test module of its own (the waiting poll's and list
tags' tests on a cluster): started once per module that asks for it, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.embedded_redis import EmbeddedRedisCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedRedisCluster]:
    cluster = EmbeddedRedisCluster(masters=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()

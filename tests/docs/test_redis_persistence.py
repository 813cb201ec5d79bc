"""The shipped Redis keeps its data across a restart (docs/operating.md: Redis): a restart is
not a flush. Each compose Redis's own arguments, run by a real redis-server of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
import yaml

from shared.embedded_redis import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
REDISES = {
    name: spec["command"]
    for name, spec in COMPOSE["services"].items()
    if str(spec.get("image", "")).startswith("redis:") and spec["command"][0] == "redis-server"
}
# a cluster node's own arguments, without the cluster: a single node's persistence is the same
CLUSTER_ONLY = {"--cluster-enabled", "--cluster-node-timeout"}


def persistence_args(command: list[str]) -> list[str]:
    assert command[0] == "redis-server"
    args, rest = [], command[1:]
    while rest:
        name, value, rest = rest[0], rest[1], rest[2:]
        if name not in CLUSTER_ONLY:
            args += [name, value]
    return args


def survives_a_restart(args: list[str]) -> bool:
    server = EmbeddedRedis(extra_args=args)
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        client.hset("tags:{taxi:o1}", "fast_info", "v7")
        client.close()
        server.terminate()  # what `docker compose restart` sends
        server.start()
        client = redis.Redis.from_url(server.url)
        kept = client.hget("tags:{taxi:o1}", "fast_info") == b"v7"
        client.close()
        return kept
    finally:
        server.close()


def test_compose_names_its_redis_servers() -> None:
    assert {"redis", "redis-node-1"} <= set(REDISES)


@pytest.mark.parametrize("name", sorted(REDISES))
def test_each_compose_redis_keeps_its_tags_across_a_restart(name: str) -> None:
    assert survives_a_restart(persistence_args(REDISES[name])), name


def test_a_redis_without_an_append_only_file_loses_them() -> None:
    """The check above can fail: the arguments compose had before lose every tag."""
    assert not survives_a_restart(["--save", "", "--appendonly", "no"])

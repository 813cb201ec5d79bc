"""The whole stack as processes on one machine: embedded Redis (unless REDIS_URL is given;
an embedded Redis Cluster on request) and every service, each waited for on /ping, stopped in
reverse order; a stateless service may run as several replicas, each on a port of its own.
Used by `mlutp run`, `mlutp loadtest` and the tests."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import aiohttp

from devtools.serve import serve_args
from shared.config import DEFAULT_PORTS
from shared.embedded_redis import EmbeddedRedis, EmbeddedRedisCluster, free_port

DEV_SERVICE_TOKEN = "dev-token"


@dataclass(frozen=True)
class StackService:
    name: str
    module: str
    port_env: str
    # variables the other services find this one by, all pointing at its URL
    url_envs: tuple[str, ...] = ()

    def port(self, env: Mapping[str, str]) -> int:
        return int(env.get(self.port_env, DEFAULT_PORTS[self.name]))

    def url(self, env: Mapping[str, str]) -> str:
        return f"http://127.0.0.1:{self.port(env)}"


# in start order: each one's dependencies come before it
STACK = (
    StackService("order_tags", "services.order_tags", "ORDER_TAGS_PORT", ("ORDER_TAGS_URL",)),
    StackService("emulator", "emulator", "EMULATOR_PORT", ("EMULATOR_URL",)),
    StackService(
        "orders_state", "services.orders_state", "ORDERS_STATE_PORT", ("ORDERS_STATE_URL",)
    ),
    StackService("launch", "services.launch", "LAUNCH_PORT", ("LAUNCH_URL",)),
    # the demo page: a browser client of the services above, for one demo user
    StackService("demo", "demo", "DEMO_PORT"),
)


def free_ports_env(services: Sequence[StackService] = STACK) -> dict[str, str]:
    """Every service on a free loopback port: a stack that touches nobody else's."""
    return {service.port_env: str(free_port()) for service in services}


async def wait_for_ping(url: str, process: asyncio.subprocess.Process, timeout_s: float) -> None:
    """Until `/ping` answers 200; fails at once if the process dies first."""
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1)) as session:
        while True:
            if process.returncode is not None:
                raise RuntimeError(f"{url}: the process exited with {process.returncode}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"{url}/ping") as response:
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url}/ping did not answer within {timeout_s} s")
            # nothing to await but the port itself: poll it
            await asyncio.sleep(0.05)


async def _terminate(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, and after 15 s SIGKILL."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()


# the services that hold no state between requests (docs/protocol.md: Processes): they may run as
# replicas
REPLICABLE = ("orders_state", "launch")


class Stack:
    def __init__(
        self,
        env: Mapping[str, str],
        services: Sequence[StackService] = STACK,
        *,
        replicas: int = 1,
        redis_cluster_masters: int = 0,
        replica_env: Mapping[int, Mapping[str, str]] | None = None,
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        output: IO[bytes] | None = None,
    ) -> None:
        """`replicas` processes of each REPLICABLE service (the first on its `<SERVICE>_PORT`,
        the others on free ports; the other services find the first by its URL variable);
        `redis_cluster_masters` > 0: an embedded Redis Cluster of that many masters instead
        of one Redis, when neither REDIS_URL nor REDIS_CLUSTER_NODES is given;
        `replica_env`: replica number → variables of those replicas only (a fleet
        mid-deploy: replica 1 on the new policy file); `settings`: service name → settings
        no variable reaches (a test's min TTL of 0: devtools/serve.py); `output`: where the
        services write their logs (stdout and stderr), else this process's own."""
        self.services = services
        self.env = dict(env)
        self.env.setdefault("MLUTP_SERVICE_TOKEN", DEV_SERVICE_TOKEN)
        if "EMULATOR_URL" not in self.env:
            # the stack's own emulator, no one else's: the demo page may switch its faults
            self.env.setdefault("DEMO_FAULT_SWITCHES", "true")
        for service in services:
            for name in service.url_envs:
                self.env.setdefault(name, service.url(self.env))
        self.replicas = {
            service.name: replicas if service.name in REPLICABLE else 1 for service in services
        }
        self.redis_cluster_masters = redis_cluster_masters
        self.replica_env = dict(replica_env or {})
        self.settings = dict(settings or {})
        self.output = output
        self.redis: EmbeddedRedis | None = None
        self.redis_cluster: EmbeddedRedisCluster | None = None
        self.processes: list[tuple[StackService, asyncio.subprocess.Process]] = []
        self._urls: dict[str, list[str]] = {}
        # a process's environment, by pid: a restart starts it again as it was
        self._envs: dict[int, dict[str, str]] = {}

    def url(self, name: str) -> str:
        return next(s for s in self.services if s.name == name).url(self.env)

    def urls(self, name: str) -> list[str]:
        """Every replica of a service, the first (`url`) first."""
        return self._urls.get(name) or [self.url(name)]

    def process(self, name: str, replica: int = 0) -> asyncio.subprocess.Process:
        return [p for s, p in self.processes if s.name == name][replica]

    async def start(self, ready_timeout_s: float = 30.0) -> None:
        """Start everything and wait for every /ping; RuntimeError if something fails."""
        if not self.env.get("REDIS_URL") and not self.env.get("REDIS_CLUSTER_NODES"):
            if self.redis_cluster_masters:
                self.redis_cluster = EmbeddedRedisCluster(masters=self.redis_cluster_masters)
                await asyncio.to_thread(self.redis_cluster.start)
                self.env["REDIS_CLUSTER_NODES"] = self.redis_cluster.startup_nodes
            else:
                self.redis = EmbeddedRedis()
                await asyncio.to_thread(self.redis.start)
                self.env["REDIS_URL"] = self.redis.url
                # the stack's own Redis: the demo page may switch it off and on
                self.env.setdefault("DEMO_TAG_CACHE_SWITCH", "true")

        for service in self.services:
            urls = self._urls.setdefault(service.name, [])
            for replica in range(self.replicas[service.name]):
                env = self.env
                if replica:
                    env = {**self.env, service.port_env: str(free_port())}
                if service.name in REPLICABLE:
                    env = {**env, **self.replica_env.get(replica, {})}
                await self._spawn(service, env, ready_timeout_s)
                urls.append(service.url(env))

    async def _spawn(
        self, service: StackService, env: Mapping[str, str], ready_timeout_s: float
    ) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *self._module_args(service),
            env=dict(env),
            stdout=self.output,
            stderr=self.output,
        )
        self.processes.append((service, process))
        self._envs[process.pid] = dict(env)
        await wait_for_ping(service.url(env), process, ready_timeout_s)

    def _module_args(self, service: StackService) -> list[str]:
        settings = self.settings.get(service.name)
        return serve_args(service.module, settings) if settings else ["-m", service.module]

    async def restart(
        self, name: str, env: Mapping[str, str], ready_timeout_s: float = 30.0
    ) -> None:
        """Every process of a service stopped (SIGTERM) and started again on its port with
        these variables changed: a deploy of a new configuration (a policy file)."""
        for service, process in [(s, p) for s, p in self.processes if s.name == name]:
            await _terminate(process)
            self.processes.remove((service, process))
            await self._spawn(service, {**self._envs.pop(process.pid), **env}, ready_timeout_s)

    async def wait_for_exit(self) -> list[str]:
        """Until any process exits; the names of those that did."""
        exits = [asyncio.ensure_future(process.wait()) for _, process in self.processes]
        try:
            await asyncio.wait(exits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in exits:
                waiter.cancel()
        return [s.name for s, p in self.processes if p.returncode is not None]

    async def close(self) -> None:
        # reverse order: front services finish their in-flight requests while backends run
        for _, process in reversed(self.processes):
            await _terminate(process)
        self.processes.clear()
        self._envs.clear()
        self._urls.clear()
        if self.redis is not None:
            await asyncio.to_thread(self.redis.close)
            self.redis = None
        if self.redis_cluster is not None:
            await asyncio.to_thread(self.redis_cluster.close)
            self.redis_cluster = None


@contextlib.asynccontextmanager
async def own_stack(
    env: Mapping[str, str],
    services: Sequence[StackService] = STACK,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> AsyncIterator[Stack]:
    """A script's stack of its own, started and always closed: SIGTERM (a `timeout`, a CI
    limit) cancels the script's task, so no process is left behind."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    stack = Stack(env, services, settings=settings)
    try:
        await stack.start()
        yield stack
    finally:
        await stack.close()
        loop.remove_signal_handler(signal.SIGTERM)

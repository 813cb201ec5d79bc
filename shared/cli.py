"""`mlutp`: the project's console script. `mlutp run` starts the whole stack on one machine."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from shared.config import DEFAULT_PORTS
from shared.embedded_redis import EmbeddedRedis

DEV_SERVICE_TOKEN = "dev-token"


@dataclass(frozen=True)
class StackService:
    name: str
    module: str
    port_env: str
    # variables the other services find this one by, all pointing at its URL
    url_envs: tuple[str, ...] = ()

    @property
    def port(self) -> int:
        return int(os.environ.get(self.port_env, DEFAULT_PORTS[self.name]))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# in start order: each one's dependencies come before it
STACK = (
    StackService("order_tags", "services.order_tags", "ORDER_TAGS_PORT", ("ORDER_TAGS_URL",)),
    StackService("emulator", "emulator", "EMULATOR_PORT", ("EMULATOR_URL",)),
    StackService("orders_state", "services.orders_state", "ORDERS_STATE_PORT"),
    StackService("launch", "services.launch", "LAUNCH_PORT"),
)


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


async def race_stop(stop: asyncio.Event, work: Coroutine[Any, Any, None]) -> bool:
    """Run `work` until it ends or `stop` is set; True when stop came first."""
    work_task = asyncio.ensure_future(work)
    stop_task = asyncio.ensure_future(stop.wait())
    done, pending = await asyncio.wait({work_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    if work_task in done:
        work_task.result()
        return False
    return True


async def run_stack(services: Sequence[StackService], ready_timeout_s: float) -> int:
    env = dict(os.environ)
    env.setdefault("MLUTP_SERVICE_TOKEN", DEV_SERVICE_TOKEN)
    # a running stack looks alive: the emulator's driver moves a population of demo users
    env.setdefault("EMULATOR_DRIVER_ENABLED", "true")
    env.setdefault("EMULATOR_DRIVER_POPULATION", "20")
    redis: EmbeddedRedis | None = None
    if not env.get("REDIS_URL") and not env.get("REDIS_CLUSTER_NODES"):
        redis = EmbeddedRedis()
        redis.start()
        env["REDIS_URL"] = redis.url

    for service in services:
        for name in service.url_envs:
            env.setdefault(name, service.url)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    processes: list[tuple[StackService, asyncio.subprocess.Process]] = []
    status = 0
    try:
        for service in services:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", service.module, env=env
            )
            processes.append((service, process))
            if await race_stop(stop, wait_for_ping(service.url, process, ready_timeout_s)):
                return 0

        print("mlutp stack is up:", flush=True)
        if redis is not None:
            print(f"  redis        {redis.url} (embedded)", flush=True)
        else:
            print(f"  redis        {env.get('REDIS_URL') or env.get('REDIS_CLUSTER_NODES')}")
        for service, _ in processes:
            print(f"  {service.name:<12} {service.url}", flush=True)
        print("Ctrl-C or SIGTERM stops everything.", flush=True)

        async def any_exit() -> None:
            exits = [asyncio.ensure_future(p.wait()) for _, p in processes]
            await asyncio.wait(exits, return_when=asyncio.FIRST_COMPLETED)

        if not await race_stop(stop, any_exit()):
            dead = [s.name for s, p in processes if p.returncode is not None]
            print(f"mlutp: {', '.join(dead)} exited; stopping the stack", file=sys.stderr)
            status = 1
    except RuntimeError as exc:
        print(f"mlutp: {exc}", file=sys.stderr)
        status = 1
    finally:
        # reverse order: front services finish their in-flight requests while backends still run
        for _, process in reversed(processes):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), 15)
                except TimeoutError:
                    process.kill()
                    await process.wait()
        if redis is not None:
            redis.close()
        print("mlutp stack stopped.", flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlutp", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="start Redis and every service; stop on Ctrl-C")
    run.add_argument("--ready-timeout", type=float, default=30.0, help="seconds to wait for /ping")
    args = parser.parse_args(argv)
    if args.command == "run":
        return asyncio.run(run_stack(STACK, args.ready_timeout))
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

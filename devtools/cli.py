"""`mlutp`: the project's console script.

- `mlutp run` starts the whole stack on one machine (`--with-clients N` adds simulated clients
  and a live summary);
- `mlutp loadtest` compares the new scheme with legacy totw polling on a stack of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from devtools.stack import Stack


async def race_stop(stop: asyncio.Event, work: Coroutine[Any, Any, Any]) -> bool:
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


def stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def run_stack(ready_timeout_s: float, with_clients: int) -> int:
    env = dict(os.environ)
    # a running stack looks alive: the emulator's driver moves a population of demo users
    env.setdefault("EMULATOR_DRIVER_ENABLED", "true")
    env.setdefault("EMULATOR_DRIVER_POPULATION", str(max(20, with_clients)))
    stack = Stack(env)
    stop = stop_on_signals()
    status = 0
    try:
        if await race_stop(stop, stack.start(ready_timeout_s)):
            return 0
        print("mlutp stack is up:", flush=True)
        redis_note = " (embedded)" if stack.redis is not None else ""
        redis_url = stack.env.get("REDIS_URL") or stack.env.get("REDIS_CLUSTER_NODES")
        print(f"  {'redis':<12} {redis_url}{redis_note}", flush=True)
        for service in stack.services:
            print(f"  {service.name:<12} {stack.url(service.name)}", flush=True)
        print("Ctrl-C or SIGTERM stops everything.", flush=True)

        work: Coroutine[Any, Any, Any] = stack.wait_for_exit()
        if with_clients:
            from devtools.live import run_live_clients

            async def exit_or_clients() -> None:
                clients = asyncio.ensure_future(run_live_clients(stack, with_clients, stop))
                exits = asyncio.ensure_future(stack.wait_for_exit())
                await asyncio.wait({clients, exits}, return_when=asyncio.FIRST_COMPLETED)
                clients.cancel()
                exits.cancel()

            work = exit_or_clients()
        if not await race_stop(stop, work):
            dead = [s.name for s, p in stack.processes if p.returncode is not None]
            if dead:
                print(f"mlutp: {', '.join(dead)} exited; stopping the stack", file=sys.stderr)
                status = 1
    except RuntimeError as exc:
        print(f"mlutp: {exc}", file=sys.stderr)
        status = 1
    finally:
        await stack.close()
        print("mlutp stack stopped.", flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlutp", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="start Redis and every service; stop on Ctrl-C")
    run.add_argument("--ready-timeout", type=float, default=30.0, help="seconds to wait for /ping")
    run.add_argument(
        "--with-clients",
        type=int,
        default=0,
        metavar="N",
        help="also run N simulated clients and print a live summary",
    )
    loadtest = commands.add_parser("loadtest", help="the new scheme vs legacy polling, measured")
    from devtools.loadtest.cli import add_arguments

    add_arguments(loadtest)
    conformance = commands.add_parser(
        "conformance", help="a client's requests checked against the contract, scenario by scenario"
    )
    from devtools.conformance.cli import add_arguments as add_conformance_arguments

    add_conformance_arguments(conformance)
    args = parser.parse_args(argv)
    if args.command == "run":
        return asyncio.run(run_stack(args.ready_timeout, args.with_clients))
    if args.command == "loadtest":
        from devtools.loadtest.cli import main as loadtest_main

        return loadtest_main(args)
    if args.command == "conformance":
        from devtools.conformance.cli import main as conformance_main

        return conformance_main(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

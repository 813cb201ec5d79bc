"""`mlutp`: the project's console script.

- `mlutp run` starts the whole stack on one machine and, once every service answers, says
  where each one is; the services' logs go to a file under .mlutp/logs (`--logs`: to the
  terminal), and `--with-clients N` adds simulated clients and a live summary;
- `mlutp loadtest` compares the new scheme with legacy totw polling on a stack of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import signal
import sys
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import IO, Any

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


# where `mlutp run` writes its services' logs, under the directory it runs in; the newest
# few runs' logs are kept
LOG_DIR = Path(".mlutp") / "logs"
KEEP_RUN_LOGS = 10
# what is shown of the log when a service fails to start or exits
TAIL_LINES = 20


def open_run_log(log_dir: Path = LOG_DIR) -> tuple[Path, IO[bytes]]:
    """A new log file for this run, the oldest beyond KEEP_RUN_LOGS removed."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / time.strftime("run-%Y%m%d-%H%M%S.log")
    # append: every service writes its lines to the same file, none over another's
    log = path.open("ab")
    for old in sorted(log_dir.glob("run-*.log"))[:-KEEP_RUN_LOGS]:
        old.unlink(missing_ok=True)
    return path, log


def shown(path: Path) -> str:
    """The path as the user can type it: relative to where mlutp runs, if it is under it."""
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd()))
    return str(path)


def log_tail(path: Path | None) -> str:
    if path is None:
        return ""
    lines = path.read_text(errors="replace").splitlines()[-TAIL_LINES:]
    return "".join(f"  | {line}\n" for line in lines) + f"(the whole log: {shown(path)})\n"


def banner(stack: Stack, log_path: Path | None) -> list[str]:
    """What `mlutp run` says once every service answers: its last lines, the URLs last."""
    where = "this terminal" if log_path is None else shown(log_path)
    lines = [
        "mlutp stack is up. Ctrl-C or SIGTERM stops everything.",
        f"logs: {where}" + ("" if log_path is None else " (`mlutp run --logs` shows them here)"),
    ]
    redis_note = " (embedded)" if stack.redis is not None else ""
    redis_url = stack.env.get("REDIS_URL") or stack.env.get("REDIS_CLUSTER_NODES")
    lines.append(f"  {'redis':<12} {redis_url}{redis_note}")
    for service in stack.services:
        note = "  (the demo page: open it in a browser)" if service.name == "demo" else ""
        lines.append(f"  {service.name:<12} {stack.url(service.name)}{note}")
    return lines


async def run_stack(ready_timeout_s: float, with_clients: int, logs_here: bool = False) -> int:
    env = dict(os.environ)
    # a running stack looks alive: the emulator's driver moves a population of demo users
    env.setdefault("EMULATOR_DRIVER_ENABLED", "true")
    env.setdefault("EMULATOR_DRIVER_POPULATION", str(max(20, with_clients)))
    log_path, log = (None, None) if logs_here else open_run_log()
    stack = Stack(env, output=log)
    stop = stop_on_signals()
    status = 0
    try:
        if await race_stop(stop, stack.start(ready_timeout_s)):
            return 0
        print("\n".join(banner(stack, log_path)), flush=True)

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
                print(log_tail(log_path), end="", file=sys.stderr)
                status = 1
    except RuntimeError as exc:
        print(f"mlutp: {exc}", file=sys.stderr)
        print(log_tail(log_path), end="", file=sys.stderr)
        status = 1
    finally:
        await stack.close()
        if log is not None:
            log.close()
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
    run.add_argument(
        "--logs",
        action="store_true",
        help=f"the services' logs to this terminal, not to a file under {LOG_DIR}",
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
        return asyncio.run(run_stack(args.ready_timeout, args.with_clients, args.logs))
    if args.command == "loadtest":
        # `python3 dev.py run` installs what running needs, not the load test's extra
        missing = [m for m in ("tqdm", "matplotlib") if importlib.util.find_spec(m) is None]
        if missing:
            print(
                f"mlutp loadtest needs the project's loadtest extra (missing:"
                f" {', '.join(missing)}): `pip install -e '.[loadtest]'` in the venv, or"
                " `python3 dev.py test`, which installs it",
                file=sys.stderr,
            )
            return 2
        from devtools.loadtest.cli import main as loadtest_main

        return loadtest_main(args)
    if args.command == "conformance":
        from devtools.conformance.cli import main as conformance_main

        return conformance_main(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""`mlutp loadtest`: its arguments, and the run."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import uvloop

from devtools.loadtest.config import LoadtestConfig
from devtools.loadtest.faults import FAULT_KINDS, FAULTS
from devtools.loadtest.runner import run_loadtest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=100, help="simulated clients (users)")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=15.0, help="unmeasured seconds per phase")
    parser.add_argument(
        "--ios-share",
        type=float,
        default=0.5,
        help="legacy clients polling every 5 s; the rest every 10 s",
    )
    parser.add_argument(
        "--fault",
        action="append",
        choices=FAULTS,
        default=[],
        help="add a phase of the new scheme with this fault",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="run the change profile this many times faster",
    )
    parser.add_argument(
        "--fault-modes",
        default="mlutp,mlutp_wait",
        help="the modes each fault is run in (comma-separated: mlutp, mlutp_wait)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="orders_state and launch processes each; the new scheme's clients take them in turn",
    )
    parser.add_argument(
        "--redis-cluster",
        type=int,
        default=0,
        metavar="MASTERS",
        help="run the tags on an embedded Redis Cluster of this many masters (0: one Redis)",
    )
    parser.add_argument(
        "--created-elsewhere",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="the share of new orders created on another device: no hint to the client, which "
        "learns of them by polling (their freshness is its own column)",
    )
    parser.add_argument(
        "--start-spread",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="spread the clients' starts over this many seconds (at most the warm-up); over "
        "list_max_age (120) with a longer warm-up, kept answers expire as a long-running "
        "population's do",
    )
    parser.add_argument("--out", type=Path, default=None, help="report folder")
    parser.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    out = args.out or Path("reports") / time.strftime("loadtest-%Y%m%d-%H%M%S")
    config = LoadtestConfig(
        clients=args.clients,
        duration_s=args.duration,
        warmup_s=args.warmup,
        ios_share=args.ios_share,
        faults=tuple(args.fault),
        fault_modes=tuple(mode for mode in args.fault_modes.split(",") if mode),
        time_scale=args.time_scale,
        out_dir=out,
        progress=not args.no_progress,
        replicas=args.replicas,
        redis_cluster=args.redis_cluster,
        created_elsewhere=args.created_elsewhere,
        start_spread_s=args.start_spread,
    )
    if config.redis_cluster and any(FAULT_KINDS[f].needs_own_redis for f in config.faults):
        print("--fault redis* acts on one Redis: not with --redis-cluster", file=sys.stderr)
        return 2
    if not 0 <= config.created_elsewhere <= 1:
        print("--created-elsewhere is a share, 0 to 1", file=sys.stderr)
        return 2
    if config.replicas < 1:
        print("--replicas must be at least 1", file=sys.stderr)
        return 2
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    with runner:
        runner.run(run_loadtest(config))
    return 0

"""Benchmark: bytes through a real HTTP/2 gateway (issue 48 item 4; docs/protocol.md: For app
developers, gzip behind a gateway).

The load test's three fault-free phases (devtools.loadtest: legacy totw polling every 5 s on
iOS and 10 s on Android, plain polls, waiting polls) run on a stack of their own, short, to
learn each scheme's mix of exchanges per client-minute; every exchange the reference clients
make is recorded as they sent it (devtools.gateway.ExchangeRecorder). Then the emulator's
driver is stopped and each scheme's exchanges are replayed by h2load through Debian's nginx
(devtools.gateway: gzip level 6 from 20 bytes, h2c on one listener, HTTP/1.1 on another), a
TCP proxy in front of each listener counting the payload both ways, headers and frames
included. An exchange's bytes are its marginal cost on an open connection; a scheme's bytes per
client-minute are its mix times those costs, so the new scheme and legacy cross the same
gateway. Printed: per exchange, up / down over h2 + gzip and over HTTP/1.1 + gzip; per
client-minute, each scheme ÷ legacy; beside them the load test's own HTTP/1.1 estimate
(client.wire_bytes: a model of the same gateway). Without nginx or h2load it says so and prints
that estimate alone.

A replayed poll is sent as the client sent it, but for two things, both the same length:
a waiting poll's `wait_ms` is --replay-wait-ms (a timeout is replayed without its whole wait),
and a poll answered 204 whose `answer_tag` the driver's last changes made stale gets the
current one (so that it is answered 204 again). A digest request is replayed as the digest of
its user's last body in full, made ready so and sent once first (so that the process keeps
it). Each replay's status is checked against the client's (nginx's access log); with
--gzip-requests every request body is sent gzipped where that makes it smaller, whatever the
client sent (the services accept it).

    python benchmarks/gateway_bytes.py [--clients 30] [--duration 60] [--warmup 15]
        [--more 3] [--replay-wait-ms 1000] [--gzip-requests] [--out gateway-bytes.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp
import uvloop

from devtools.exchange_recording import ExchangeRecorder, Recorded
from devtools.gateway import (
    ExchangeBytes,
    Gateway,
    direct_status,
    missing_tools,
    negotiated_h2,
    replay,
    running_gateway,
)
from devtools.loadtest.config import LoadtestConfig, PhaseResult
from devtools.loadtest.phases import run_phase
from devtools.stack import Stack, free_ports_env
from shared.protocol.request_digest import is_digest_request, request_digest

PHASES = ("legacy", "mlutp", "mlutp_wait")
SCHEMES = {"mlutp": "plain polls", "mlutp_wait": "waiting polls"}
POLL = "/mlutp/v1/orders/state"
# the exchanges the issue names, by (phase, key)
NAMED = (
    ("poll → 200", "mlutp", f"{POLL} 200"),
    ("poll → 204 nothing new", "mlutp", f"{POLL} 204"),
    ("poll by digest → 204", "mlutp", f"{POLL} 204 digest"),
    ("waiting poll → 204 timeout", "mlutp_wait", f"{POLL} 204"),
    ("waiting poll by digest → 204 timeout", "mlutp_wait", f"{POLL} 204 digest"),
    ("legacy totw", "legacy", "/3.0/taxiontheway 200"),
)


@dataclass
class Measured:
    """One exchange of a phase through the gateway, both listeners."""

    phase: str
    key: str
    per_client_minute: float
    h2: ExchangeBytes
    h1: ExchangeBytes
    h2_negotiated: bool
    request_body: int


async def mix_and_samples(
    clients: int, duration_s: float, warmup_s: float
) -> tuple[Stack, dict[str, PhaseResult], ExchangeRecorder, aiohttp.ClientSession]:
    """The three phases on a stack of its own (left running for the replay)."""
    env: dict[str, str] = dict(os.environ)
    env.pop("REDIS_URL", None)
    env.pop("REDIS_CLUSTER_NODES", None)
    env.update(free_ports_env())
    env.update(
        {
            "LOG_LEVEL": "ERROR",
            "EMULATOR_DRIVER_ENABLED": "true",
            "EMULATOR_DRIVER_POPULATION": str(clients),
        }
    )
    config = LoadtestConfig(
        clients=clients, duration_s=duration_s, warmup_s=warmup_s, progress=False
    )
    stack = Stack(env)
    recorder = ExchangeRecorder()
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), trace_configs=[recorder.trace]
    )
    phases: dict[str, PhaseResult] = {}
    try:
        await stack.start()
        for name in PHASES:
            recorder.group = name
            print(f"phase {name}: {warmup_s:.0f} s + {duration_s:.0f} s", file=sys.stderr)
            phases[name] = await run_phase(name, name, None, stack, session, config, lambda: None)
    except BaseException:
        await session.close()
        await stack.close()
        raise
    recorder.group = "after"
    return stack, phases, recorder, session


async def ready_to_replay(
    session: aiohttp.ClientSession,
    phase: str,
    recorded: Recorded,
    replay_wait_ms: int,
    gzip_requests: bool,
    recorder: ExchangeRecorder,
) -> Recorded | None:
    """The recorded exchange as it is replayed, answered as it was; None if it is not."""
    if is_digest_request(recorded.plain_body()):
        return await digest_to_replay(session, phase, recorded, replay_wait_ms, recorder)
    sample = recorded.with_wait_ms(replay_wait_ms) if phase == "mlutp_wait" else recorded
    if gzip_requests:
        sample = sample.gzipped_if_smaller()
    status, payload = await direct_status(session, sample)
    if status == 200 and recorded.status == 204 and recorded.path == POLL:
        # the driver changed the user's orders after this poll: the current answer's tag
        tag = json.loads(payload).get("answer_tag")
        sample = sample.with_body_field("answer_tag", tag)
        status, _ = await direct_status(session, sample)
    return sample if status == recorded.status else None


async def digest_to_replay(
    session: aiohttp.ClientSession,
    phase: str,
    recorded: Recorded,
    replay_wait_ms: int,
    recorder: ExchangeRecorder,
) -> Recorded | None:
    """A digest request stands for its user's last body in full: that body (made ready as any
    poll answered 204) is sent once so that the process keeps it, and the digest of what was
    sent is replayed, its body the client's length."""
    full = recorder.full_requests.get((phase, recorded.path, recorded.user))
    if full is None:
        return None
    as_204 = Recorded(full.method, full.url, full.headers, full.body, recorded.status)
    kept = await ready_to_replay(session, phase, as_204, replay_wait_ms, False, recorder)
    if kept is None:
        return None
    digest = {"request_digest": request_digest(kept.plain_body())}
    sample = recorded.with_plain_body(json.dumps(digest).encode())
    status, _ = await direct_status(session, sample)
    return sample if status == recorded.status else None


async def measure(
    gateway: Gateway,
    session: aiohttp.ClientSession,
    phases: dict[str, PhaseResult],
    recorder: ExchangeRecorder,
    more: int,
    replay_wait_ms: int,
    gzip_requests: bool,
) -> list[Measured]:
    measured: list[Measured] = []
    for phase in PHASES:
        mix = phases[phase].exchanges_per_client_minute
        samples = recorder.samples.get(phase, {})
        for key, rate in sorted(mix.items(), key=lambda item: -item[1]):
            recorded = samples.get(key)
            if recorded is None:
                print(f"  {phase} {key}: no exchange recorded, not replayed", file=sys.stderr)
                continue
            sample = await ready_to_replay(
                session, phase, recorded, replay_wait_ms, gzip_requests, recorder
            )
            if sample is None:
                print(f"  {phase} {key}: answered otherwise now, not replayed", file=sys.stderr)
                continue
            h2 = await replay(gateway, sample, http2=True, more=more)
            h1 = await replay(gateway, sample, http2=False, more=more)
            answered = set(h2.statuses) | set(h1.statuses)
            if answered != {recorded.status}:
                print(
                    f"  {phase} {key}: replays answered {sorted(h2.statuses + h1.statuses)}, "
                    "not counted",
                    file=sys.stderr,
                )
                continue
            measured.append(
                Measured(
                    phase,
                    key,
                    rate,
                    h2.exchange,
                    h1.exchange,
                    negotiated_h2(h2),
                    len(sample.body),
                )
            )
    return measured


def per_client_minute(measured: list[Measured], phase: str, http2: bool) -> float:
    return sum(
        m.per_client_minute * (m.h2 if http2 else m.h1).both for m in measured if m.phase == phase
    )


def estimate_table(phases: dict[str, PhaseResult]) -> list[str]:
    """The load test's HTTP/1.1 estimate (client.wire_bytes) per client-minute, ÷ legacy."""
    legacy = phases["legacy"].wire_bytes_per_client_minute.get("gzip_headers", 0.0)
    lines = ["| scheme | bytes / client-min | ÷ legacy |", "|---|---:|---:|"]
    for phase in PHASES:
        size = phases[phase].wire_bytes_per_client_minute.get("gzip_headers", 0.0)
        ratio = f"{size / legacy:.3f}" if legacy else "—"
        lines.append(f"| {SCHEMES.get(phase, 'legacy')} | {size:,.0f} | {ratio} |")
    return lines


def report(
    measured: list[Measured], phases: dict[str, PhaseResult], gzip_requests: bool
) -> list[str]:
    bodies = (
        "request bodies gzipped where smaller (--gzip-requests)"
        if gzip_requests
        else "request bodies as the clients sent them"
    )
    lines = [
        f"Per exchange on an open connection, TCP payload up / down (bytes; {bodies}):",
        "",
        "| exchange | h2 + gzip | HTTP/1.1 + gzip | per client-min |",
        "|---|---:|---:|---:|",
    ]
    by_key = {(m.phase, m.key): m for m in measured}
    for label, phase, key in NAMED:
        m = by_key.get((phase, key))
        if m is None:
            lines.append(f"| {label} | not measured | | |")
            continue
        lines.append(
            f"| {label} | {m.h2.up:,.0f} / {m.h2.down:,.0f} | {m.h1.up:,.0f} / {m.h1.down:,.0f} "
            f"| {m.per_client_minute:.2f} |"
        )
    named = {(phase, key) for _, phase, key in NAMED}
    for m in measured:
        if (m.phase, m.key) not in named:
            lines.append(
                f"| {m.phase}: {m.key} | {m.h2.up:,.0f} / {m.h2.down:,.0f} "
                f"| {m.h1.up:,.0f} / {m.h1.down:,.0f} | {m.per_client_minute:.2f} |"
            )
    legacy_h2 = per_client_minute(measured, "legacy", True)
    legacy_h1 = per_client_minute(measured, "legacy", False)
    lines += [
        "",
        "Per client-minute, both ways (each scheme's mix of exchanges × their bytes):",
        "",
        "| scheme | h2 + gzip | ÷ legacy | HTTP/1.1 + gzip | ÷ legacy | estimate ÷ legacy |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    estimate_legacy = phases["legacy"].wire_bytes_per_client_minute.get("gzip_headers", 0.0)
    for phase in PHASES:
        h2 = per_client_minute(measured, phase, True)
        h1 = per_client_minute(measured, phase, False)
        estimate = phases[phase].wire_bytes_per_client_minute.get("gzip_headers", 0.0)
        lines.append(
            f"| {SCHEMES.get(phase, 'legacy')} | {h2:,.0f} | {h2 / legacy_h2:.3f} "
            f"| {h1:,.0f} | {h1 / legacy_h1:.3f} | {estimate / estimate_legacy:.3f} |"
        )
    negotiated = all(m.h2_negotiated for m in measured)
    lines += [
        "",
        f"h2 negotiated on every h2 connection: {'yes' if negotiated else 'NO'}; "
        "estimate: the load test's model of the gateway over HTTP/1.1 (client.wire_bytes)",
    ]
    return lines


async def main(args: argparse.Namespace) -> int:
    missing = missing_tools()
    stack, phases, recorder, session = await mix_and_samples(
        args.clients, args.duration, args.warmup
    )
    measured: list[Measured] = []
    try:
        if missing:
            print(
                f"\nno gateway measured: Debian's {' and '.join(missing)} not installed "
                "(.ci/run installs it). The load test's HTTP/1.1 estimate instead "
                "(client.wire_bytes: a model of the gateway), per client-minute, both ways:\n"
            )
            print("\n".join(estimate_table(phases)))
        else:
            async with session.post(
                f"{stack.url('emulator')}/emulator/v1/driver", json={"enabled": False}
            ) as response:
                response.raise_for_status()
            routes = {
                recorded.path: recorded.url[: -len(recorded.path)] or recorded.url
                for group in recorder.samples.values()
                for recorded in group.values()
            }
            async with running_gateway(routes) as gateway:
                measured = await measure(
                    gateway,
                    session,
                    phases,
                    recorder,
                    args.more,
                    args.replay_wait_ms,
                    args.gzip_requests,
                )
            print()
            print("\n".join(report(measured, phases, args.gzip_requests)))
    finally:
        await session.close()
        await stack.close()
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "missing": missing,
                    "gzip_requests": args.gzip_requests,
                    "exchanges": [asdict(m) for m in measured],
                    "mix": {p: phases[p].exchanges_per_client_minute for p in PHASES},
                    "estimate": {
                        p: phases[p].wire_bytes_per_client_minute.get("gzip_headers", 0.0)
                        for p in PHASES
                    },
                },
                indent=2,
            )
        )
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=30, help="simulated clients per phase")
    parser.add_argument("--duration", type=float, default=60.0, help="measured s per phase")
    parser.add_argument("--warmup", type=float, default=15.0, help="unmeasured s per phase")
    parser.add_argument(
        "--more", type=int, default=3, help="exchanges beyond the first in a marginal count"
    )
    parser.add_argument(
        "--replay-wait-ms",
        type=int,
        default=1000,
        help="a waiting poll's wait when replayed (at most as many digits as the client's)",
    )
    parser.add_argument(
        "--gzip-requests",
        action="store_true",
        help="replay every request body gzipped (Content-Encoding: gzip) where that makes it "
        "smaller, whatever the client sent",
    )
    parser.add_argument("--out", type=Path, default=None, help="the figures as JSON")
    return parser.parse_args(argv)


if __name__ == "__main__":
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    with runner:
        sys.exit(runner.run(main(parse_args())))

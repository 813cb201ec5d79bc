"""Benchmark (issue 42): what a waiting poll costs beside a plain poll at the same paced rate,
and a paced plain poll beside the same poll in a closed loop, per process, in one run.

A stack of its own (embedded Redis, order_tags, the emulator with its driver off, one
orders_state), every process on loopback. U caught-up users: one driving taxi order each,
every tag current, a superapp poll (taxi, eats, grocery) with nothing new, sending back the
answer_tag of the answer it holds as an app does (so it is answered 204); one warm-up poll
each keeps the sources' answers (list_max_age is 300 s, so none expires mid-run and no source
is asked). Then, one after the other:

- idle: nothing sent; each process's CPU per second, taken off every phase below;
- plain paced: each user polls (wait_ms 0) once per `--period` s, the users spread over it;
- waiting paced: each user's poll waits (`--wait-ms`, 1000: its wait ends without news, as
  `timeout`) and the user polls again at once, as a waiting client does: about one poll per
  user and wait, the plain paced phase's rate with the default period. Its re-polls go as the
  reference clients send them, the digest of the body sent last (docs/protocol.md: The digest
  request); `waiting paced full` the same with every body in full, for comparison;
- ping paced: each user GETs orders_state's /ping once per wait, the waiting phase's rate: the
  framework's floor a held re-poll (the watch cache's, no look) is measured against;
- legacy paced: each user calls the legacy pass-through (/3.0/taxiontheway) once per period;
- closed N: N workers poll back to back (wait_ms 0), for each N of `--concurrency`, and
  `legacy closed N` the same of the legacy pass-through (`--no-legacy`: no legacy phases).

Each phase runs a warm-up, then a window of `--seconds` in which CPU is read from
/proc/<pid>/stat (utime + stime) of orders_state, order_tags, Redis and the emulator, and the
polls answered in the window are counted; the counters are read outside the window (Redis's
INFO commandstats, order_tags' and orders_state's /metrics), so their scrapes cost the window
nothing. Printed per poll: CPU µs per process and for the BFF (orders_state + order_tags +
Redis), with and without the idle CPU, user/kernel time, wakeups and read/write system calls,
Redis commands by name, order_tags calls by route (and Redis hedges), looks and tag cache
reads; then the ratios waiting ÷ plain paced, plain paced ÷ closed, and waiting ÷ legacy per
request and per active order-minute (capacity.py's RATES). The tag read's deadlines are
raised (`--tags-deadline-s`): on a shared machine a process waiting for a CPU would otherwise
degrade polls now and then (a warning says how many still did).

`--profile DIR` also samples orders_state and order_tags in both paced phases' windows: with
py-spy (raw collapsed stacks; top frames by self and total), or with `--perf` Linux perf's
on-CPU samples (by shared object and symbol). py-spy counts a process waiting for a CPU as
active, so on a busy machine its `run_service` and socket-write frames are inflated; perf
counts CPU only. Profiling perturbs the windows a little: take the CPU figures from a run
without it.

    python benchmarks/waiting_cost.py [--users 40] [--seconds 20] [--wait-ms 1000]
        [--period 1.0] [--concurrency 1,20] [--no-legacy] [--log-level ERROR]
        [--profile DIR [--perf] [--profile-rate 250]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import redis.asyncio as aioredis
import uvloop
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.capacity import RATES, SUPERAPP
from benchmarks.users import POLICY, TAG_DEFINED, caught_up_users
from client.transport import request_digest
from devtools.stack import STACK, Stack, free_ports_env, own_stack
from shared.protocol.tags import encode_tag
from shared.redis import tags_key
from shared.wire import WAIT_HEADER

PROCESSES = ("orders_state", "order_tags", "redis", "emulator")
BFF = ("orders_state", "order_tags", "redis")
# the orders_state counters a poll moves (/metrics), by the sample names they are read from
STATE_COUNTERS = (
    "mlutp_poll_look_seconds_count",
    "mlutp_tag_cache_calls_total",
    "mlutp_order_source_calls_total",
    "mlutp_upstream_calls_total",
    "mlutp_waiting_poll_answers_total",
    "mlutp_wakeups_total",
    "mlutp_wakeup_messages_total",
    "mlutp_waiting_cached_looks_total",
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# the repository's own files are named from it in a profile's frames
ROOT = f"{Path(__file__).resolve().parents[1]}/"
POLL_PATH = "/mlutp/v1/orders/state"
LEGACY_PATH = "/3.0/taxiontheway"


# what /proc says of a process: CPU seconds in user space and in the kernel (every thread),
# the main thread's voluntary context switches (how often its loop slept and was woken), and
# its read- and write-family system calls (sockets included)
COUNTERS = ("user", "sys", "wakeups", "syscr", "syscw")


def proc_counters(pid: int) -> dict[str, float]:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    status = Path(f"/proc/{pid}/status").read_text()
    wakeups = next(
        line.split()[1] for line in status.splitlines() if line.startswith("voluntary_ctxt")
    )
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return {
        "user": int(stat[11]) / CLOCK_TICKS,
        "sys": int(stat[12]) / CLOCK_TICKS,
        "wakeups": float(wakeups),
        "syscr": float(io["syscr"]),
        "syscw": float(io["syscw"]),
    }


@dataclass
class Snapshot:
    at: float
    proc: dict[str, dict[str, float]]
    answered: int
    # counters read outside the window: Redis commands by name, order_tags calls by route,
    # orders_state's poll counters
    redis_commands: Counter[str] = field(default_factory=Counter)
    order_tags_calls: Counter[str] = field(default_factory=Counter)
    state: Counter[str] = field(default_factory=Counter)


@dataclass
class Phase:
    name: str
    polls: int
    seconds: float
    # per process, COUNTERS over the window, what the idle process does in as long taken off
    proc: dict[str, dict[str, float]]
    redis_commands: Counter[str]
    order_tags_calls: Counter[str]
    state: Counter[str]
    causes: Counter[str]
    # the BFF processes' idle CPU over the window (taken off `proc`), in seconds
    idle_bff_s: float

    def us(self, process: str) -> float:
        """CPU µs per poll, user and kernel."""
        counters = self.proc[process]
        return (counters["user"] + counters["sys"]) / self.polls * 1e6

    def bff_us(self) -> float:
        return sum(self.us(p) for p in BFF)

    def per_poll(self, count: float) -> float:
        return count / self.polls


async def prometheus(session: aiohttp.ClientSession, url: str) -> Counter[str]:
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    samples: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = int(sample.value)
    return samples


class Bench:
    def __init__(
        self,
        stack: Stack,
        session: aiohttp.ClientSession,
        redis: aioredis.Redis,
        users: list[tuple[str, str]],
        bodies: list[dict[str, Any]],
    ) -> None:
        self.stack = stack
        self.session = session
        self.redis = redis
        self.users = users
        self.bodies = bodies
        self.state_url = stack.url("orders_state")
        self.pids = {s.name: p.pid for s, p in stack.processes}
        assert stack.redis is not None and stack.redis.pid is not None
        self.pids["redis"] = stack.redis.pid
        self.answered = 0
        self.causes: Counter[str] = Counter()
        self.answer_tags: dict[int, str | None] = {}
        # per user: the last full body sent and answered, and its digest
        self.sent_full: dict[int, tuple[bytes, str]] = {}
        self.stopping = False

    async def poll(self, index: int, wait_ms: int, *, digest: bool = False) -> None:
        """One poll of the user's; `digest`: a body the same as the last one sent, answered,
        goes as its digest, as the reference clients send it (docs/protocol.md: The digest
        request), and in full again when the server does not keep it."""
        user, _ = self.users[index]
        body: dict[str, Any] = {
            "known_orders": [self.bodies[index]],
            "supported_services": SUPERAPP,
            "wait_ms": wait_ms,
        }
        # as an app does: the answer_tag of the answer it holds, so "nothing new" is a 204
        if self.answer_tags.get(index) is not None:
            body["answer_tag"] = self.answer_tags[index]
        plain = json.dumps(body).encode()
        last = self.sent_full.get(index)
        if digest and last is not None and last[0] == plain:
            short = json.dumps({"request_digest": last[1]}).encode()
            if await self._post(index, user, short):
                return
        self.sent_full.pop(index, None)
        assert await self._post(index, user, plain), "a full body is never unknown"
        self.sent_full[index] = (plain, request_digest(plain))

    async def _post(self, index: int, user: str, sent: bytes) -> bool:
        """False for a digest the server does not keep (nothing counted)."""
        headers = {"X-Yandex-UID": user, "Content-Type": "application/json"}
        async with self.session.post(
            self.state_url + POLL_PATH, data=sent, headers=headers
        ) as response:
            payload = await response.read()
            if response.status == 400 and b"unknown_request_digest" in payload:
                self.causes["unknown digest"] += 1
                return False
            assert response.status in (200, 204), (response.status, payload[:200])
            if response.status == 200:
                self.answer_tags[index] = json.loads(payload).get("answer_tag")
            self.causes[response.headers.get(WAIT_HEADER, "-")] += 1
        self.answered += 1
        return True

    async def legacy(self, index: int) -> None:
        """The legacy pass-through (/3.0/taxiontheway) for the user's order: what the old
        polling cost this layer, the baseline of issue 42's goal."""
        user, orderid = self.users[index]
        async with self.session.post(
            self.state_url + LEGACY_PATH, json={"orderid": orderid}, headers={"X-Yandex-UID": user}
        ) as response:
            payload = await response.read()
            assert response.status == 200, (response.status, payload[:200])
            self.causes["legacy"] += 1
        self.answered += 1

    async def ping(self) -> None:
        """The service's /ping: the framework's floor for a request that does no work."""
        async with self.session.get(self.state_url + "/ping") as response:
            await response.read()
            assert response.status == 200, response.status
            self.causes["ping"] += 1
        self.answered += 1

    def proc_now(self) -> dict[str, dict[str, float]]:
        return {name: proc_counters(self.pids[name]) for name in PROCESSES}

    async def counters(self, snapshot: Snapshot) -> None:
        stats = await self.redis.info("commandstats")
        for key, value in stats.items():
            # the benchmark's own INFO is no poll's
            if key.startswith("cmdstat_") and key != "cmdstat_info":
                snapshot.redis_commands[key.removeprefix("cmdstat_")] = int(value["calls"])
        tags = await prometheus(self.session, self.stack.url("order_tags"))
        for name, value in tags.items():
            if name.startswith("http_requests_total{") and "route=/v1/" in name:
                route = name.split("route=", 1)[1].split(",", 1)[0].rstrip("}")
                snapshot.order_tags_calls[route] += value
            elif name.startswith("mlutp_redis_hedges_total"):
                # a Redis call sent again: a busy machine's late answers cost commands too
                snapshot.order_tags_calls[f"hedge {name.split('outcome=', 1)[1].rstrip('}')}"] = (
                    value
                )
        state = await prometheus(self.session, self.state_url)
        for name, value in state.items():
            if name.startswith(STATE_COUNTERS):
                snapshot.state[name] = value

    async def window_start(self) -> Snapshot:
        # the scrapes first: the window starts after them
        snapshot = Snapshot(0.0, {}, 0)
        await self.counters(snapshot)
        snapshot.at, snapshot.proc, snapshot.answered = (
            time.monotonic(),
            self.proc_now(),
            self.answered,
        )
        return snapshot

    async def window_end(self) -> Snapshot:
        snapshot = Snapshot(time.monotonic(), self.proc_now(), self.answered)
        await self.counters(snapshot)
        return snapshot

    async def run_phase(
        self,
        name: str,
        drivers: list[Callable[[], Coroutine[Any, Any, None]]],
        warmup_s: float,
        seconds: float,
        idle: dict[str, dict[str, float]],
        profile: Callable[[str, float], Awaitable[None]] | None = None,
    ) -> Phase:
        self.stopping = False
        self.causes.clear()
        tasks = [asyncio.create_task(driver()) for driver in drivers]
        # a load's warm-up and window are spans of wall time: sleeps are the point
        await asyncio.sleep(warmup_s)
        start = await self.window_start()
        causes_before = Counter(self.causes)
        if profile is not None:
            await asyncio.gather(profile(name, seconds), asyncio.sleep(seconds))
        else:
            await asyncio.sleep(seconds)
        end = await self.window_end()
        causes = Counter(self.causes)
        causes.subtract(causes_before)
        self.stopping = True
        await asyncio.gather(*tasks)
        elapsed = end.at - start.at
        polls = end.answered - start.answered
        proc = {
            p: {c: end.proc[p][c] - start.proc[p][c] - idle[p][c] * elapsed for c in COUNTERS}
            for p in PROCESSES
        }
        return Phase(
            name,
            polls,
            elapsed,
            proc,
            diff(end.redis_commands, start.redis_commands),
            diff(end.order_tags_calls, start.order_tags_calls),
            diff(end.state, start.state),
            +causes,
            sum((idle[p]["user"] + idle[p]["sys"]) * elapsed for p in BFF),
        )

    async def idle(self, seconds: float) -> dict[str, dict[str, float]]:
        """Each process's COUNTERS per second with nothing sent."""
        before = self.proc_now()
        started = time.monotonic()
        await asyncio.sleep(seconds)  # idleness is a span of time
        after = self.proc_now()
        elapsed = time.monotonic() - started
        return {p: {c: (after[p][c] - before[p][c]) / elapsed for c in COUNTERS} for p in PROCESSES}

    # the drivers: each one a user (paced) or a worker (closed loop), until `stopping`
    def paced(
        self,
        index: int,
        period_s: float,
        started: float,
        *,
        legacy: bool = False,
        ping: bool = False,
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        async def drive() -> None:
            loop = asyncio.get_running_loop()
            # the users spread over the period, as apps' polls are
            next_at = started + period_s * index / len(self.users)
            while not self.stopping:
                # a client's timer between polls: the pacing is the point
                await asyncio.sleep(max(0.0, next_at - loop.time()))
                if self.stopping:
                    return
                if ping:
                    await self.ping()
                else:
                    await (self.legacy(index) if legacy else self.poll(index, 0))
                next_at = max(next_at + period_s, loop.time())

        return drive

    def waiting(
        self, index: int, wait_ms: int, *, digest: bool = True
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        async def drive() -> None:
            # the users' first polls spread over a wait, as apps' are
            await asyncio.sleep(wait_ms / 1000 * index / len(self.users))
            while not self.stopping:
                # answered at its wait's end (timeout): polls again at once
                await self.poll(index, wait_ms, digest=digest)

        return drive

    def closed(
        self, worker: int, workers: int, *, legacy: bool = False
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        async def drive() -> None:
            index = worker
            while not self.stopping:
                user = index % len(self.users)
                await (self.legacy(user) if legacy else self.poll(user, 0))
                index += workers

        return drive


async def stored_bodies(
    redis: aioredis.Redis, bodies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The known orders with every tag as stored now, issued a minute ago."""
    version = POLICY.version("taxi")
    issued = int(time.time() * 1000) - 60_000
    fresh = []
    for body in bodies:
        stored = cast(dict[str, str], await redis.hgetall(tags_key("taxi", body["orderid"])))
        tags = {p: encode_tag(version, stored.get(p), issued) for p in TAG_DEFINED}
        fresh.append({**body, "tags": tags})
    return fresh


def diff(after: Counter[str], before: Counter[str]) -> Counter[str]:
    changed = Counter(after)
    changed.subtract(before)
    return +changed


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    return found


def profiler(
    bench: Bench, directory: Path, rate: int, native: bool, perf: bool
) -> Callable[[str, float], Awaitable[None]]:
    """py-spy record of orders_state and order_tags for a window, raw collapsed stacks; with
    `perf`, Linux perf's on-CPU samples instead (cpu-clock: time spent waiting for a CPU on a
    busy machine is not counted, which py-spy's "active" samples may count)."""
    binary = shutil.which("perf") or "perf" if perf else py_spy()
    directory.mkdir(parents=True, exist_ok=True)

    async def record(phase: str, seconds: float) -> None:
        runs = []
        for process in ("orders_state", "order_tags"):
            out = directory / f"{phase.replace(' ', '_')}-{process}.txt"
            if perf:
                command = [binary, "record", "-e", "cpu-clock", "-F", str(rate), "-g"]
                command += ["-p", str(bench.pids[process]), "-o", str(out.with_suffix(".perf"))]
                command += ["--", "sleep", str(seconds)]
                runs.append(
                    await asyncio.create_subprocess_exec(
                        *command,
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=asyncio.subprocess.DEVNULL,
                    )
                )
                continue
            command = [
                binary,
                "record",
                "--pid",
                str(bench.pids[process]),
                "--rate",
                str(rate),
                "--duration",
                str(max(1, int(seconds))),
                "--format",
                "raw",
                "--nonblocking",
                "-o",
                str(out),
            ]
            if native:
                command.append("--native")
            runs.append(
                await asyncio.create_subprocess_exec(
                    *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
                )
            )
        await asyncio.gather(*(run.wait() for run in runs))

    return record


def cprofiler(bench: Bench) -> Callable[[str, float], Awaitable[None]]:
    """cProfile of orders_state for exactly a window: devtools.serve (which runs it with its
    settings) starts and stops it on SIGUSR1 (MLUTP_CPROFILE_DIR set for the stack); each
    phase's stats are the process's next file."""

    async def record(phase: str, seconds: float) -> None:
        os.kill(bench.pids["orders_state"], signal.SIGUSR1)
        await asyncio.sleep(seconds)  # the window is a span of time
        os.kill(bench.pids["orders_state"], signal.SIGUSR1)

    return record


def cprofile_summary(path: Path, top: int) -> str:
    """A window's cProfile: the functions with the most own time, per call of the window."""
    stats = pstats.Stats(str(path))
    rows = sorted(
        stats.stats.items(),  # type: ignore[attr-defined]
        key=lambda item: item[1][2],
        reverse=True,
    )
    total = sum(row[1][2] for row in rows) or 1.0
    lines = [f"{path.name}: {total * 1e3:.0f} ms of own time (profiled: slower than unprofiled)"]
    for (filename, line, function), (_, calls, own, cumulative, _) in rows[:top]:
        where = filename.split("site-packages/")[-1].replace(ROOT, "")
        lines.append(
            f"  {own / total * 100:5.1f} %  own {own * 1e3:7.1f} ms  cum {cumulative * 1e3:7.1f} ms"
            f"  {calls:>7} calls  {function} ({where}:{line})"
        )
    return "\n".join(lines)


def perf_summary(path: Path, top: int) -> str:
    """A perf profile's on-CPU samples by shared object, and its top symbols (self)."""
    lines = [f"{path.name}:"]
    for sort in ("dso", "dso,sym"):
        command = ["perf", "report", "-i", str(path), "--stdio", "--no-children", "-g", "none"]
        command += ["--sort", sort, "--percent-limit", "0.5"]
        report = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        rows = [row for row in report.splitlines() if row.strip() and not row.startswith("#")]
        lines.append(f"  by {sort}:")
        lines += [f"    {row.strip()}" for row in rows[:top]]
    return "\n".join(lines)


def frame_name(frame: str) -> str:
    """`function (path:line)` without the line: a function's samples together."""
    head, _, place = frame.rpartition(" (")
    if not head:
        return frame
    path = place.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", ROOT, "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{head} ({path})"


def summarize(path: Path, top: int) -> str:
    """The top frames of a raw py-spy profile by self and by total samples, in %."""
    self_samples: Counter[str] = Counter()
    total_samples: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";")]
        # the thread's name first: not a frame
        if frames and frames[0].startswith(("process ", "thread ")):
            frames = frames[1:]
        if not frames:
            continue
        samples += count
        self_samples[frames[-1]] += count
        for frame in set(frames):
            total_samples[frame] += count
    if not samples:
        return f"{path.name}: no samples"
    lines = [f"{path.name}: {samples} samples"]
    for title, counts in (("self", self_samples), ("total", total_samples)):
        lines.append(f"  top by {title}:")
        for frame, count in counts.most_common(top):
            lines.append(f"    {count / samples * 100:5.1f} %  {frame}")
    return "\n".join(lines)


def report(phases: list[Phase], idle: dict[str, dict[str, float]], users: int) -> None:
    print(
        f"{users} caught-up users, a superapp poll ({', '.join(SUPERAPP)}) with nothing new; "
        "CPU µs per poll (idle CPU taken off; +idle: the BFF's with it)"
    )
    print(
        "idle, per second: "
        + "; ".join(
            f"{p} CPU {(idle[p]['user'] + idle[p]['sys']) * 100:.2f} % of a core, "
            f"{idle[p]['wakeups']:.0f} wakeups"
            for p in PROCESSES
        )
    )
    head = (
        f"{'phase':<15}{'polls':>7}{'polls/s':>9}{'orders_state':>13}{'order_tags':>11}"
        f"{'redis':>8}{'emulator':>9}{'BFF':>8}{'+idle':>7}{'looks':>7}{'tag rd':>7}{'ot calls':>9}"
        f"{'redis cmds':>11}{'cached':>8}"
    )
    print(head)
    for phase in phases:
        looks = sum(v for k, v in phase.state.items() if k.startswith("mlutp_poll_look"))
        reads = sum(v for k, v in phase.state.items() if k.startswith("mlutp_tag_cache_calls"))
        calls = sum(n for route, n in phase.order_tags_calls.items() if route.startswith("/"))
        # waiting polls held from the last look, with no look (the watch cache)
        cached = sum(v for k, v in phase.state.items() if k.startswith("mlutp_waiting_cached"))
        print(
            f"{phase.name:<15}{phase.polls:>7}{phase.polls / phase.seconds:>9.1f}"
            f"{phase.us('orders_state'):>13.0f}{phase.us('order_tags'):>11.0f}"
            f"{phase.us('redis'):>8.0f}{phase.us('emulator'):>9.0f}{phase.bff_us():>8.0f}"
            f"{phase.bff_us() + phase.idle_bff_s / phase.polls * 1e6:>7.0f}"
            f"{phase.per_poll(looks):>7.2f}{phase.per_poll(reads):>7.2f}"
            f"{phase.per_poll(calls):>9.3f}"
            f"{phase.per_poll(sum(phase.redis_commands.values())):>11.3f}"
            f"{phase.per_poll(cached):>8.2f}"
        )
    print(
        "\nper poll, from /proc: CPU µs in user space / in the kernel, wakeups (voluntary "
        "context switches), read / write system calls"
    )
    print(f"{'phase':<15}" + "".join(f"{p:>30}" for p in PROCESSES))
    for phase in phases:
        cells = []
        for p in PROCESSES:
            c = {k: phase.per_poll(v) for k, v in phase.proc[p].items()}
            cells.append(
                f"{c['user'] * 1e6:.0f}/{c['sys'] * 1e6:.0f} µs {c['wakeups']:.2f}w "
                f"{c['syscr']:.2f}r {c['syscw']:.2f}w"
            )
        print(f"{phase.name:<15}" + "".join(f"{cell:>30}" for cell in cells))
    print("\nper poll, by kind (counters read outside the window):")
    for phase in phases:
        commands = ", ".join(
            f"{name} {phase.per_poll(n):.3f}" for name, n in phase.redis_commands.most_common()
        )
        routes = ", ".join(
            f"{route} {phase.per_poll(n):.3f}" for route, n in phase.order_tags_calls.most_common()
        )
        state = ", ".join(
            f"{name} {phase.per_poll(n):.3f}"
            for name, n in sorted(phase.state.items())
            if not name.startswith("mlutp_poll_look")
        )
        print(f"  {phase.name}: answers by X-Mlutp-Wait {dict(phase.causes)}")
        other = sum(
            n
            for cause, n in phase.causes.items()
            if cause not in ("timeout", "-", "legacy", "ping")
        )
        if other > 0.01 * phase.polls:
            # nothing changes in a run: a waiting poll answered before its wait's end is not
            # the cost measured here (a client answered `news` polls again at once)
            print(f"    WARNING: {other} answers not at their wait's end")
        not_ok = sum(
            n
            for name, n in phase.state.items()
            if name.startswith("mlutp_tag_cache_calls") and "outcome=ok" not in name
        )
        if not_ok:
            # a tag read past its deadline degrades the poll: it asks the sources, and a
            # waiting one answers at once; such polls are not the cost measured here
            print(
                f"    WARNING: {not_ok} tag cache reads not ok ({not_ok / phase.polls:.1%} of "
                "polls degraded: a busy machine); run again on a quieter one"
            )
        print(f"    redis: {commands or '-'}")
        print(f"    order_tags: {routes or '-'}")
        print(f"    orders_state: {state or '-'}")
    by_name = {phase.name: phase for phase in phases}
    plain, waiting = by_name["plain paced"], by_name["waiting paced"]

    def ratios(a: Phase, b: Phase) -> str:
        parts = [f"{p} {a.us(p) / b.us(p):.2f}" for p in BFF if b.us(p) > 0]
        return f"BFF {a.bff_us() / b.bff_us():.2f} ({', '.join(parts)})"

    print(f"\nwaiting paced / plain paced: {ratios(waiting, plain)}   [goal BFF <= 1.5]")
    ping = by_name["ping paced"]
    full = by_name["waiting paced full"]
    print(
        "orders_state per waiting re-poll / per /ping, same paced rate: "
        f"{waiting.us('orders_state') / ping.us('orders_state'):.2f} by digest, "
        f"{full.us('orders_state') / ping.us('orders_state'):.2f} in full   [goal <= 1.3]"
    )
    print(f"waiting paced by digest / in full: {ratios(waiting, full)}")
    for phase in phases:
        if phase.name.startswith("closed"):
            print(f"plain paced / {phase.name}: {ratios(plain, phase)}   [goal BFF <= 1.5]")
    legacy = by_name.get("legacy paced")
    if legacy is not None:
        # a BFF's CPU per active order and minute: waiting polls at their rate beside legacy
        # calls at theirs (benchmarks/capacity.py's RATES, measured by `mlutp loadtest`); the
        # waiting scheme's parts and re-asks come on top (capacity.py measures them)
        per_min, legacy_per_min = RATES["mlutp_wait"]["waiting"], RATES["legacy"]["legacy"]
        minute = per_min * waiting.bff_us() / (legacy_per_min * legacy.bff_us())
        print(
            f"per request, waiting paced / legacy paced: BFF "
            f"{waiting.bff_us() / legacy.bff_us():.2f}; per active order-minute, "
            f"{per_min} waiting polls / {legacy_per_min} legacy calls (capacity.py's RATES, "
            f"before parts and re-asks): BFF {minute:.2f}   "
            "[goal, parts and re-asks included: <= 1.0]"
        )


async def run(
    args: argparse.Namespace,
) -> tuple[list[Phase], dict[str, dict[str, float]]]:
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": args.log_level}
    if args.cprofile:
        env["MLUTP_CPROFILE_DIR"] = args.cprofile
    env |= {"EMULATOR_DRIVER_ENABLED": "false"}
    protocol = {
        # what a poll costs, not admission control
        "admission": {"min_polls_in_flight": 2000},
        # no kept answer expires mid-run: no source is asked, every poll has nothing new
        "list_max_age_s": 300,
    }
    # on a shared machine a process waiting for a CPU misses the tag read's 50 ms now and
    # then, and the poll degrades (asks the sources; a waiting one answers at once): not the
    # cost measured here. The work of a poll that makes it is the same
    env.setdefault("MLUTP_TAGS_DEADLINE_S", str(args.tags_deadline_s))
    # and order_tags' Redis call's 100 ms likewise (hedges still go after 10 ms: counted)
    env.setdefault("REDIS_COMMAND_DEADLINE_S", str(args.tags_deadline_s))
    env.pop("REDIS_URL", None)
    services = [s for s in STACK if s.name in ("orders_state", "order_tags", "emulator")]
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]
    # waiting re-polls held from the client's last look, or not (the services' default: on;
    # off, a wake-up lost on a live connection waits one wait, not the next full look)
    orders_state: dict[str, Any] = {"protocol": protocol, "watch_cache": args.watch_cache}
    async with own_stack(env, services, {"orders_state": orders_state}) as stack:
        redis = aioredis.Redis.from_url(stack.env["REDIS_URL"], decode_responses=True)
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=30)
        ) as session:
            users, bodies = await caught_up_users(
                session, stack.url("emulator"), redis, args.users, "waiting-cost"
            )
            bench = Bench(stack, session, redis, users, bodies)
            # warm-up: every user's sources asked once and their answers kept
            for index in range(len(users)):
                await bench.poll(index, 0)
            # then each known order with the tags stored now: a tag write the emulator lost
            # on a busy machine was made by the warm-up poll (create_missing), and a client
            # holding no content for it would get it in need_request on every poll (a
            # waiting one: news at once, again and again)
            bench.bodies = await stored_bodies(redis, bodies)
            idle = await bench.idle(args.idle_seconds)
            profile = (
                profiler(bench, Path(args.profile), args.profile_rate, args.native, args.perf)
                if args.profile
                else cprofiler(bench)
                if args.cprofile
                else None
            )
            loop = asyncio.get_running_loop()
            phases: list[Phase] = []
            phases.append(
                await bench.run_phase(
                    "plain paced",
                    [bench.paced(i, args.period, loop.time()) for i in range(len(users))],
                    args.period + 1,
                    args.seconds,
                    idle,
                    profile,
                )
            )
            # the first waiting poll of each user subscribes its channels: the warm-up takes
            # two waits, so the window sees the steady state (channels kept by the linger).
            # Re-polls as the reference clients send them (a digest of the body sent last),
            # then, for comparison, every body in full
            for name, digest in (("waiting paced", True), ("waiting paced full", False)):
                phases.append(
                    await bench.run_phase(
                        name,
                        [bench.waiting(i, args.wait_ms, digest=digest) for i in range(len(users))],
                        2 * args.wait_ms / 1000 + 1,
                        args.seconds,
                        idle,
                        profile if digest else None,
                    )
                )
            # the floor a held re-poll is measured against: /ping at the waiting phase's rate
            # (one request per user and wait), the users spread over it
            phases.append(
                await bench.run_phase(
                    "ping paced",
                    [
                        bench.paced(i, args.wait_ms / 1000, loop.time(), ping=True)
                        for i in range(len(users))
                    ],
                    args.wait_ms / 1000 + 1,
                    args.seconds,
                    idle,
                    profile,
                )
            )
            if args.legacy:
                phases.append(
                    await bench.run_phase(
                        "legacy paced",
                        [
                            bench.paced(i, args.period, loop.time(), legacy=True)
                            for i in range(len(users))
                        ],
                        args.period + 1,
                        args.seconds,
                        idle,
                    )
                )
            for workers in concurrencies:
                for legacy in (False, True) if args.legacy else (False,):
                    phases.append(
                        await bench.run_phase(
                            f"{'legacy ' if legacy else ''}closed {workers}",
                            [bench.closed(w, workers, legacy=legacy) for w in range(workers)],
                            1.0,
                            args.closed_seconds,
                            idle,
                        )
                    )
        await redis.aclose()
    return phases, idle


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=20.0, help="each paced window")
    parser.add_argument("--closed-seconds", type=float, default=10.0, help="each closed window")
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--wait-ms", type=int, default=1000)
    parser.add_argument(
        "--watch-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hold waiting re-polls from the client's last look (the services' default: on)",
    )
    parser.add_argument("--period", type=float, default=1.0, help="s between a user's plain polls")
    parser.add_argument("--concurrency", default="1,20", help="closed-loop workers, a list")
    parser.add_argument("--log-level", default="ERROR", help="the services' LOG_LEVEL")
    parser.add_argument(
        "--tags-deadline-s",
        type=float,
        default=0.5,
        help="the BFF's tag read deadline and order_tags' Redis deadline",
    )
    parser.add_argument(
        "--no-legacy", dest="legacy", action="store_false", help="no legacy pass-through phases"
    )
    parser.add_argument("--profile", default="", help="a directory: py-spy the paced phases")
    parser.add_argument("--profile-rate", type=int, default=250, help="py-spy samples per s")
    parser.add_argument("--native", action="store_true", help="py-spy --native")
    parser.add_argument("--perf", action="store_true", help="Linux perf, not py-spy")
    parser.add_argument(
        "--cprofile", default="", help="a directory: cProfile the paced phases' windows"
    )
    parser.add_argument("--top", type=int, default=25, help="frames shown per profile")
    args = parser.parse_args()
    phases, idle = uvloop.run(run(args))
    report(phases, idle, args.users)
    if args.profile:
        for path in sorted(Path(args.profile).glob("*.txt")):
            print()
            print(summarize(path, args.top))
        for path in sorted(Path(args.profile).glob("*.perf")):
            print()
            print(perf_summary(path, args.top))
    if args.cprofile:
        # one file per window, in the order of the profiled phases
        profiled = [
            p.name for p in phases if p.name in ("plain paced", "waiting paced", "ping paced")
        ]
        for path in sorted(Path(args.cprofile).glob("*.pstats")):
            window = int(path.stem.rsplit("-", 1)[1])
            print(f"\n{profiled[window - 1]}, {path.name.split('-')[0]}:")
            print(cprofile_summary(path, args.top))

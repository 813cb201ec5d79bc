"""Benchmark: orders_state overloaded by a closed loop of many connections, with admission
control (the cap of polls in progress the process clears in its budget, or --cap N fixed) and
without it (a cap no load reaches), side by side in one run, at each connection count. A
connection answered 503 waits its Retry-After and a random part of a second, as the reference
client does.

First, bursts: N polls sent at once on N open connections, to a cold process (the burst is its
first work) and to a warm one (after two seconds of load and a pause). Goal: none shed up to
what the process clears in 250 ms (its warm throughput x 0.25), and no tag-cache or source
call timed out or circuit opened by the process's own queue.

Beside them, the floor of a closed loop's first instant: the same number of clients
connecting and sending at once to a process with a cap of 1, every poll but one refused.
How long that process takes to answer them all is time the storm's admitted polls wait
behind, whatever the cap.

For each: admitted polls (200) per second and their p50/p99 (and the p99 of those sent after
the first 2 s: N clients connecting in the same instant is a burst of N, the rest of the run
the lasting overload); the share answered 503 and how
fast a 503 comes; and the share of 200s that said an order source was unavailable (with the
polls queued in the process past the sources' deadline, a user opening the app sees no
orders). The server under test runs on CPU 0; the load, Redis, order_tags and the emulator on
CPU 1.

Bounds asserted on admission control (the exit status is 1 when one fails): at most 2 % of
admitted polls say a source is unavailable, admitted p50 and 503 p50 within 100 ms, admitted
p99 within 250 ms, no circuit opened; bursts as above.

    python benchmarks/overload.py [--seconds 10] [--connections 1000,3000]
                                  [--bursts 50,100,200,500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.loadgen import build_request, percentile, read_response
from devtools.bench_stack import Stack, post_json, upstream_stack, wait_http
from devtools.serve import serve_args
from shared.embedded_redis import free_port

PATH = "/mlutp/v1/orders/state"
USERS = 50
UNCAPPED = 1_000_000
MAX_UNAVAILABLE_SHARE = 0.02
MAX_P50_S = 0.1
MAX_P99_S = 0.25
WARMUP_S = 2.0
BUDGET_S = 0.25
# the process's own queue opening circuits or timing calls out: these metrics must not move
OWN_QUEUE_SIGNS = (
    'mlutp_tag_cache_calls_total{outcome="unavailable"}',
    'mlutp_tag_cache_calls_total{outcome="circuit_open"}',
    'mlutp_order_source_calls_total{outcome="unavailable",service="taxi"}',
    'mlutp_order_source_calls_total{outcome="unavailable",service="eats"}',
)


@dataclass
class Outcome:
    statuses: Counter[int] = field(default_factory=Counter)
    latencies: dict[int, list[float]] = field(default_factory=dict)
    unavailable: int = 0
    seconds: float = 0.0
    # admitted polls sent after the first WARMUP_S of a closed loop: N clients connecting in
    # the same instant is a burst (above), and the rest of the run is the lasting overload
    steady: list[float] = field(default_factory=list)

    def line(self, name: str) -> str:
        total = sum(self.statuses.values())
        ok = self.latencies.get(200, [])
        shed = self.latencies.get(503, [])
        return (
            f"{name:26s} admitted {len(ok) / self.seconds:6.0f}/s  "
            f"p50 {percentile(ok, 0.5) * 1000:7.1f} ms  p99 {percentile(ok, 0.99) * 1000:7.1f} ms "
            f"(after {WARMUP_S:.0f} s {percentile(self.steady, 0.99) * 1000:6.1f} ms)  "
            f"503 {self.statuses[503] / max(total, 1):6.1%} "
            f"(p50 {percentile(shed, 0.5) * 1000:6.1f} ms)  "
            f"source unavailable {self.unavailable / max(len(ok), 1):6.1%} of 200s  "
            f"other {total - self.statuses[200] - self.statuses[503]}"
        )

    def broken_bounds(self) -> list[str]:
        ok = self.latencies.get(200, [])
        shed = self.latencies.get(503, [])
        broken = []
        if self.unavailable > MAX_UNAVAILABLE_SHARE * len(ok):
            broken.append(f"source unavailable in over {MAX_UNAVAILABLE_SHARE:.0%} of 200s")
        if not ok or percentile(ok, 0.5) > MAX_P50_S:
            broken.append(f"admitted p50 over {MAX_P50_S * 1000:.0f} ms")
        if shed and percentile(shed, 0.5) > MAX_P50_S:
            broken.append(f"503 p50 over {MAX_P50_S * 1000:.0f} ms")
        if ok and percentile(ok, 0.99) > MAX_P99_S:
            broken.append(f"admitted p99 over {MAX_P99_S * 1000:.0f} ms")
        return broken


def metrics_text(url: str) -> str:
    """A service's /metrics, as text."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        text: str = response.read().decode()
    return text


def own_queue_signs(port: int) -> dict[str, float]:
    """The metrics that move when the process's own queue times calls out or opens circuits."""
    text = metrics_text(f"http://127.0.0.1:{port}")
    found = dict.fromkeys(OWN_QUEUE_SIGNS, 0.0)
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in found:
            found[name] = float(value)
    return found


def answered_within(text: str, route: str, status: str, le: str) -> tuple[float, float]:
    """From a service's own latency histogram (its /metrics text): how many requests of
    `route` answered `status` it finished within `le` seconds, and how many in all."""
    within = total = 0.0
    for line in text.splitlines():
        if not line.startswith("http_request_duration_seconds_"):
            continue
        if f'route="{route}"' not in line or f'status="{status}"' not in line:
            continue
        name, _, value = line.rpartition(" ")
        if name.startswith("http_request_duration_seconds_bucket") and f'le="{le}"' in name:
            within = float(value)
        elif name.startswith("http_request_duration_seconds_count"):
            total = float(value)
    return within, total


def metric_sum_count(text: str, histogram: str) -> tuple[float, float]:
    """A histogram's sum and count (no labels) from a service's /metrics text."""
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in (f"{histogram}_sum", f"{histogram}_count"):
            values[name] = float(value)
    return values.get(f"{histogram}_sum", 0.0), values.get(f"{histogram}_count", 0.0)


def cpu_busy(cpu: int) -> tuple[float, float]:
    """CPU `cpu`'s busy and total jiffies since boot (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            fields = [float(value) for value in line.split()[1:]]
            idle = fields[3] + fields[4]
            return sum(fields) - idle, sum(fields)
    return 0.0, 0.0


@dataclass
class Split:
    """Where an admitted poll's time goes, read around one run: the server's own view of
    its admitted polls (from reading the request to writing the answer), order_tags' view of
    its tag reads, and how busy CPU 1 was (the load generator, order_tags, the emulator and
    Redis share it: when it is full, their queue shows up in the client's p99, not ours)."""

    orders_state_url: str
    order_tags_url: str
    readings: list[tuple[float, float]] = field(default_factory=list)

    def read(self) -> None:
        orders_state = metrics_text(self.orders_state_url)
        self.readings = [
            answered_within(orders_state, PATH, "200", "0.25"),
            answered_within(metrics_text(self.order_tags_url), "/v1/tags/get", "200", "0.05"),
            cpu_busy(1),
            (time.process_time(), time.perf_counter()),
            metric_sum_count(orders_state, "mlutp_event_loop_lag_seconds"),
        ]

    def since(self, before: Split) -> str:
        shares = [
            (after[0] - first[0]) / max(after[1] - first[1], 1e-9)
            for after, first in zip(self.readings, before.readings, strict=True)
        ]
        return (
            f"server-side: admitted within 250 ms {shares[0]:.2%}, "
            f"tag reads within 50 ms {shares[1]:.2%}; "
            f"CPU 1 busy {shares[2]:.0%} (load generator {shares[3]:.0%}); "
            f"orders_state's loop lag {shares[4] * 1000:.1f} ms on average"
        )


def split_of(orders_state_port: int, stack: Stack) -> Split:
    split = Split(f"http://127.0.0.1:{orders_state_port}", stack.order_tags_url)
    split.read()
    return split


def moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in after if after[name] > before[name]}


async def burst(
    port: int, requests: list[bytes], size: int, *, connect_first: bool = True
) -> Outcome:
    """`size` polls sent at once, each on a connection opened before; without
    `connect_first`, `size` clients that connect and send in the same instant (a closed
    loop's first moment)."""
    connections = (
        [await asyncio.open_connection("127.0.0.1", port) for _ in range(size)]
        if connect_first
        else []
    )
    outcome = Outcome()
    started = time.perf_counter()

    async def one(index: int) -> None:
        try:
            if connect_first:
                reader, writer = connections[index]
            else:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            outcome.statuses[0] += 1
            return
        try:
            writer.write(requests[index % len(requests)])
            status, body, _ = await read_response(reader)
            outcome.statuses[status] += 1
            outcome.latencies.setdefault(status, []).append(time.perf_counter() - started)
            if status == 200 and b"service_unavailable" in body:
                outcome.unavailable += 1
        except (OSError, asyncio.IncompleteReadError):
            outcome.statuses[0] += 1
        finally:
            writer.close()

    await asyncio.gather(*(one(index) for index in range(size)))
    outcome.seconds = time.perf_counter() - started
    return outcome


def refusal_floor(stack: Stack, body: bytes, connections: int) -> str:
    """How long a process takes to accept and refuse a storm of `connections` clients, with
    a cap of 1 (every poll but one shed, each at the least cost a poll can have): the floor
    under the storm's admitted polls, which take their event loop turns between these."""
    port, process = start_orders_state(stack, 1)
    requests = [
        build_request(port, PATH, body, {"X-Yandex-UID": f"u{user}"}) for user in range(USERS)
    ]
    outcome = asyncio.run(burst(port, requests, connections, connect_first=False))
    process.terminate()
    process.wait(10)
    shed = outcome.latencies.get(503, [])
    return (
        f"{'refusing alone (cap 1)':26s} {connections} clients at once: all answered in "
        f"{outcome.seconds * 1000:.0f} ms; 503 p50 {percentile(shed, 0.5) * 1000:.0f} ms, "
        f"p99 {percentile(shed, 0.99) * 1000:.0f} ms ({outcome.statuses[503]} shed, "
        f"{outcome.statuses[0]} not answered)"
    )


def burst_line(name: str, size: int, outcome: Outcome, signs: dict[str, float]) -> str:
    ok = outcome.latencies.get(200, [])
    return (
        f"{name:5s} burst {size:4d}: shed {outcome.statuses[503]:4d}  "
        f"all answered in {outcome.seconds * 1000:6.1f} ms  "
        f"p99 {percentile(ok, 0.99) * 1000:6.1f} ms  "
        f"source unavailable {outcome.unavailable}  own queue signs {signs or 'none'}"
    )


async def _connection(
    port: int,
    requests: list[bytes],
    index: int,
    started_at: float,
    stop_at: float,
    outcome: Outcome,
) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        outcome.statuses[0] += 1
        return
    request = requests[index % len(requests)]
    try:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            writer.write(request)
            status, body, retry_after = await read_response(reader)
            outcome.statuses[status] += 1
            outcome.latencies.setdefault(status, []).append(time.perf_counter() - started)
            if status == 200 and started - started_at >= WARMUP_S:
                outcome.steady.append(time.perf_counter() - started)
            if status == 200 and b"service_unavailable" in body:
                outcome.unavailable += 1
            if status == 503:
                # a client told to come back later does, as the reference client does: after
                # Retry-After's whole seconds and a random part of one (within the run)
                pause = retry_after + random.random() if retry_after is not None else 0.05
                await asyncio.sleep(max(0.0, min(pause, stop_at - time.perf_counter())))
    except (OSError, asyncio.IncompleteReadError):
        outcome.statuses[0] += 1
    finally:
        writer.close()


async def closed_loop(
    port: int, requests: list[bytes], connections: int, seconds: float
) -> Outcome:
    outcome = Outcome()
    started = time.perf_counter()
    await asyncio.gather(
        *(
            _connection(port, requests, i, started, started + seconds, outcome)
            for i in range(connections)
        )
    )
    outcome.seconds = time.perf_counter() - started
    return outcome


def start_orders_state(stack: Stack, cap: int | None) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    stack.env["ORDERS_STATE_PORT"] = str(port)
    protocol = (
        {}
        if cap is None
        else {"admission": {"min_polls_in_flight": cap}, "max_polls_in_flight": cap}
    )
    args = serve_args("services.orders_state", {"protocol": protocol})
    stack.start(args, 0, f"http://127.0.0.1:{port}/ping")
    return port, stack.processes[-1]


def run_bursts(stack: Stack, body: bytes, sizes: list[int], cap: int | None) -> bool:
    """Bursts on a cold process (a new one each) and on a warm one; True if a bound broke."""
    if not sizes:
        return False
    failed = False
    print("\nbursts: N polls at once on N open connections")
    warm_port, warm_process = start_orders_state(stack, cap)
    requests = [
        build_request(warm_port, PATH, body, {"X-Yandex-UID": f"u{user}"}) for user in range(USERS)
    ]
    # the warm process's throughput: what it clears in its budget
    warmed = asyncio.run(closed_loop(warm_port, requests, 50, 2.0))
    clears = int(len(warmed.latencies.get(200, [])) / warmed.seconds * BUDGET_S)
    print(f"warm throughput {clears / BUDGET_S:.0f} polls/s: {clears} polls cleared in 250 ms")
    for size in sizes:
        cold_port, cold_process = start_orders_state(stack, cap)
        cold_requests = [
            request.replace(f":{warm_port}".encode(), f":{cold_port}".encode())
            for request in requests
        ]
        before = own_queue_signs(cold_port)
        cold = asyncio.run(burst(cold_port, cold_requests, size))
        cold_signs = moved(before, own_queue_signs(cold_port))
        cold_process.terminate()
        cold_process.wait(10)
        time.sleep(1.0)  # the warm process idle again: its windows say so
        before = own_queue_signs(warm_port)
        warm = asyncio.run(burst(warm_port, requests, size))
        warm_signs = moved(before, own_queue_signs(warm_port))
        for name, outcome, signs in (("cold", cold, cold_signs), ("warm", warm, warm_signs)):
            print(burst_line(name, size, outcome, signs))
            if size <= clears and (outcome.statuses[503] or signs):
                failed = True
                print(f"  bound broken: {size} <= {clears} polls cleared in 250 ms")
    warm_process.terminate()
    warm_process.wait(10)
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", default="1000,3000")
    parser.add_argument("--bursts", default="50,100,200,500")
    parser.add_argument(
        "--cap",
        type=int,
        default=None,
        help="a fixed cap instead of the adaptive one (min and max polls in flight)",
    )
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    counts = [int(c) for c in args.connections.split(",")]
    failed = False

    with upstream_stack(cpu=1) as stack:
        emulator = stack.emulator_url
        body = json.dumps({"supported_services": ["taxi", "eats"]}).encode()
        for user in range(USERS):
            for service in ("taxi", "eats"):
                post_json(
                    f"{emulator}/emulator/v1/orders",
                    json.dumps({"user_id": f"u{user}", "service": service}).encode(),
                )
        bursts = [int(size) for size in args.bursts.split(",") if size]
        failed = run_bursts(stack, body, bursts, args.cap) or failed
        ports = {
            "admission control": start_orders_state(stack, args.cap)[0],
            "no cap": start_orders_state(stack, UNCAPPED)[0],
        }
        cap = json.loads(
            post_json(
                f"http://127.0.0.1:{ports['admission control']}{PATH}",
                body,
                {"X-Yandex-UID": "u0"},
            )
        )
        assert cap["orders"], cap

        for connections in counts:
            print(f"\n{connections} connections, {args.seconds:.0f} s each")
            results = {}
            for name, port in ports.items():
                wait_http(f"http://127.0.0.1:{port}/ping")
                requests = [
                    build_request(port, PATH, body, {"X-Yandex-UID": f"u{user}"})
                    for user in range(USERS)
                ]
                before = own_queue_signs(port)
                split = split_of(port, stack)
                results[name] = asyncio.run(closed_loop(port, requests, connections, args.seconds))
                signs = moved(before, own_queue_signs(port))
                print(results[name].line(name) + f"  own queue signs {signs or 'none'}")
                print(f"{'':26s} {split_of(port, stack).since(split)}")
                if name == "admission control" and signs:
                    failed = True
            # what the storm's first instant costs the process before any look
            print(refusal_floor(stack, body, connections))
            capped, uncapped = results["admission control"], results["no cap"]
            p99 = percentile(capped.latencies.get(200, []), 0.99)
            p99_uncapped = percentile(uncapped.latencies.get(200, []), 0.99)
            if p99:
                print(f"admitted p99, no cap / admission control: {p99_uncapped / p99:.1f}")
            broken = capped.broken_bounds()
            print("bounds: " + ("; ".join(broken) if broken else "held"))
            failed = failed or bool(broken)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

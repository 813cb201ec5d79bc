"""A lean HTTP/1.1 keep-alive load generator for benchmarks: raw asyncio streams, prebuilt
request bytes, so the client costs far less than the server it measures. Bounded by time
and by count; loopback only."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass, field


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of the values by rank (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def add(self, other: LoadResult) -> None:
        self.requests += other.requests
        self.errors += other.errors
        self.seconds += other.seconds
        self.latencies.extend(other.latencies)

    def line(self, name: str) -> str:
        return (
            f"{name:15s} {self.rps:7.0f} rps  p50 {self.percentile(0.5) * 1000:6.2f} ms  "
            f"p99 {self.percentile(0.99) * 1000:6.2f} ms  errors {self.errors}"
        )

    def percentile(self, q: float) -> float:
        return percentile(self.latencies, q)


def bench_args(doc: str | None, connections: int = 32) -> argparse.Namespace:
    """The options every benchmark takes; and the load generator moves to CPU 1, leaving
    CPU 0 to the server under test."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="side-by-side rounds")
    parser.add_argument("--connections", type=int, default=connections)
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    return args


def round_ratios(rounds: list[tuple[LoadResult, LoadResult]]) -> str:
    """Per-round rps ratios (measured side by side, so noise hits both alike) and their median:
    steadier than one ratio of totals on a shared machine."""
    ratios = sorted(a.rps / b.rps for a, b in rounds if b.rps)
    listed = ", ".join(f"{r:.2f}" for r in ratios)
    return f"per-round ratios {listed}; median {ratios[len(ratios) // 2]:.2f}"


def build_request(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, float | None]:
    """One HTTP/1.1 response with a Content-Length: its status, its body and its Retry-After
    in seconds, if any."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    retry_after = None
    for line in head.split(b"\r\n"):
        name = line[:15].lower()
        if name == b"content-length:":
            length = int(line[15:])
        elif name[:12] == b"retry-after:":
            retry_after = float(line[12:])
    return int(head[9:12]), await reader.readexactly(length), retry_after


async def _connection(
    port: int, request: bytes, stop_at: float, budget: list[int], result: LoadResult
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < stop_at and budget[0] > 0:
            budget[0] -= 1
            started = time.perf_counter()
            writer.write(request)
            status, _, _ = await read_response(reader)
            result.latencies.append(time.perf_counter() - started)
            result.requests += 1
            if status != 200:
                result.errors += 1
    finally:
        writer.close()


async def run_load(
    port: int,
    path: str,
    body: bytes,
    *,
    headers: dict[str, str] | None = None,
    connections: int = 32,
    seconds: float = 5.0,
    max_requests: int = 200_000,
) -> LoadResult:
    request = build_request(port, path, body, headers or {})
    result = LoadResult()
    budget = [max_requests]
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(
        *(_connection(port, request, stop_at, budget, result) for _ in range(connections))
    )
    result.seconds = time.perf_counter() - started
    return result

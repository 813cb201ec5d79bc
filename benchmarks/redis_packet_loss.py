"""Benchmark: the tag cache over a link to Redis that loses packets (issue 38, item 11), with
order_tags' hedging off (before) and on (after), each with no loss and with one packet in
`--one-in` lost, side by side in one run.

Redis runs in a network namespace of its own, joined to this one by a veth pair; an nftables
rule in the namespace drops packets at random, both ways, on Redis's port only
(devtools/lossy_link.py; the kernel has no netem). order_tags runs in this process as it runs
in production (its settings from RedisSettings: the 100 ms deadline, the hedge), and so does
the BFF's side of the tag cache: the joined reads, the order_tags client with the poll's
50 ms deadline, and the circuit breaker (5 failed calls in a row open it for 2 s). Polls come
at a fixed rate, each one a poll's read: two orders and one list.

For each phase: the share of packets the rule dropped, the share of polls whose read failed
(the poll degraded: need_request rule 3), the share of the time the circuit was open, p50 and
p99 of the read's latency (every read: a failed one waits its deadline, one refused by the open
circuit none), and the hedges order_tags sent per order_tags call.

Needs root, `ip` and `nft` (Debian's iproute2 and nftables).

    python benchmarks/redis_packet_loss.py [--seconds 20] [--rate 200] [--one-in 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis
from aiohttp import web
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.lossy_link import LossyLink, lossy_link
from services.bff.config import ProtocolSettings
from services.bff.metrics import BffMetrics
from services.bff.tag_cache import TagCache
from services.bff.tag_reads import JoinedTagReads
from services.order_tags.app import create_app
from services.order_tags.config import OrderTagsSettings
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis, free_port
from shared.order_tags_client import OrderTagsClient
from shared.protocol.circuit import CircuitBreaker
from shared.redis import tags_key
from shared.web import METRICS
from shared.wire import ListKey, OrderKey

TOKEN = "bench-token"
USERS = 200


def poll_keys(user: int) -> tuple[list[OrderKey], list[ListKey]]:
    """What one user's poll reads: a taxi and an eats order, and the taxi list."""
    orders = [OrderKey("taxi", f"loss-{user}-t"), OrderKey("eats", f"loss-{user}-e")]
    return orders, [ListKey("taxi", f"loss-user-{user}")]


def seed(url: str) -> None:
    """Every order has its tags: a read answers what a real one would."""
    client = redis.Redis.from_url(url)
    try:
        pipe = client.pipeline(transaction=False)
        for user in range(USERS):
            for order in poll_keys(user)[0]:
                pipe.hset(tags_key(order.service, order.orderid), mapping={"fast_info": "v1"})
        pipe.execute()
    finally:
        client.close()


class TimedCircuit(CircuitBreaker):
    """The BFF's circuit, keeping how long it has been open."""

    def __init__(self, failures_to_open: int, open_s: float) -> None:
        super().__init__(failures_to_open, open_s)
        self.open_total_s = 0.0
        self._open_since: float | None = None

    def failure(self, now: float) -> None:
        super().failure(now)
        self._mark()

    def success(self) -> None:
        super().success()
        self._mark()

    def _mark(self) -> None:
        # the tag cache passes time.monotonic() to failure(); success() has no time
        now = time.monotonic()
        if self.is_open and self._open_since is None:
            self._open_since = now
        elif not self.is_open and self._open_since is not None:
            self.open_total_s += now - self._open_since
            self._open_since = None

    def open_so_far(self) -> float:
        if self._open_since is None:
            return self.open_total_s
        return self.open_total_s + time.monotonic() - self._open_since


@dataclass(frozen=True)
class Mode:
    """What is measured: order_tags' hedge (REDIS_HEDGE_AFTER_S, 0: off), and the BFF's
    circuit (circuit_failures in a row open it; None: never open, the most any
    circuit that opens on a failure rate instead could give)."""

    hedge_after_s: float
    circuit_failures: int | None

    @property
    def label(self) -> str:
        hedge = f"{self.hedge_after_s * 1000:g} ms" if self.hedge_after_s else "off"
        circuit = f"{self.circuit_failures} in a row" if self.circuit_failures else "never"
        return f"{hedge:>6} {circuit:>11}"


@dataclass
class Phase:
    mode: Mode
    loss: str
    dropped: float
    polls: int
    degraded: float
    circuit_open: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    hedges_per_call: float
    over_budget: int


def counter(app: web.Application, name: str, labels: dict[str, str]) -> float:
    value = app[METRICS].registry.get_sample_value(name, labels)
    return value or 0.0


HEDGES_SENT = ("mlutp_redis_hedges_total", {"outcome": "sent"})
HEDGES_OVER_BUDGET = ("mlutp_redis_hedges_total", {"outcome": "over_budget"})
READS = [
    ("http_requests_total", {"route": "/v1/tags/get", "method": "POST", "status": status})
    for status in ("200", "503")
]


async def run_phase(
    app: web.Application,
    url: str,
    link: LossyLink,
    redis_port: int,
    one_in: int | None,
    *,
    mode: Mode,
    seconds: float,
    rate: float,
) -> Phase:
    protocol = ProtocolSettings()
    circuit = TimedCircuit(mode.circuit_failures or 2**62, protocol.circuit_open_s)
    client = OrderTagsClient(
        url,
        TOKEN,
        deadline_s=protocol.tags_deadline_s,
        own_queue_allowance_s=protocol.admission.budget_ms / 1000,
    )
    joined = JoinedTagReads(
        client,
        max_in_flight=protocol.tag_reads.in_flight,
        gather_s=protocol.tag_reads.gather_ms / 1000,
    )
    cache = TagCache(joined, circuit, BffMetrics(CollectorRegistry()))
    latencies: list[float] = []
    degraded = 0

    async def poll(user: int) -> None:
        nonlocal degraded
        orders, lists = poll_keys(user)
        started = time.monotonic()
        read = await cache.read(orders, lists)
        latencies.append(time.monotonic() - started)
        degraded += read is None

    samples = [HEDGES_SENT, HEDGES_OVER_BUDGET, *READS]
    before = [counter(app, *sample) for sample in samples]
    link.drop(redis_port, one_in)
    polls: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    started = loop.time()
    count = int(seconds * rate)
    try:
        for index in range(count):
            # an open-loop load: polls come on time, whatever the cache does
            await asyncio.sleep(max(0.0, started + index / rate - loop.time()))
            task = asyncio.create_task(poll(index % USERS))
            polls.add(task)
            task.add_done_callback(polls.discard)
        # each read ends by its deadline (50 ms, and the allowance for a busy loop)
        async with asyncio.timeout(5):
            await asyncio.gather(*polls)
        open_share = circuit.open_so_far() / (loop.time() - started)
        seen, lost = link.dropped()
    finally:
        link.drop(redis_port, None)
        await joined.close()
        await client.close()
    sent, over_budget, answered, refused = (
        counter(app, *sample) - old for sample, old in zip(samples, before, strict=True)
    )
    latencies.sort()
    return Phase(
        mode=mode,
        loss=f"1 in {one_in}" if one_in else "none",
        dropped=lost / seen if seen else 0.0,
        polls=count,
        degraded=degraded / count,
        circuit_open=open_share,
        p50_ms=statistics.median(latencies) * 1000,
        p90_ms=latencies[int(0.90 * (len(latencies) - 1))] * 1000,
        p99_ms=latencies[int(0.99 * (len(latencies) - 1))] * 1000,
        hedges_per_call=sent / (answered + refused) if answered + refused else 0.0,
        over_budget=int(over_budget),
    )


async def run_mode(
    link: LossyLink,
    server: EmbeddedRedis,
    mode: Mode,
    losses: Sequence[int | None],
    *,
    seconds: float,
    rate: float,
) -> list[Phase]:
    """order_tags with the mode's hedge, one phase per loss (one packet in N; None: none)."""
    settings = OrderTagsSettings(
        port=0,
        service_token=TOKEN,
        redis=RedisSettings(url=server.url, hedge_after_s=mode.hedge_after_s),
    )
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        return [
            await run_phase(
                app,
                f"http://127.0.0.1:{port}",
                link,
                server.port,
                one_in,
                mode=mode,
                seconds=seconds,
                rate=rate,
            )
            for one_in in losses
        ]
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def lossy_redis() -> Iterator[tuple[LossyLink, EmbeddedRedis]]:
    """A Redis of its own in a namespace of its own (no loss yet), with every order's tags."""
    with lossy_link() as link:
        # protected mode refuses all but loopback: the namespace is reachable only from here
        server = EmbeddedRedis(
            port=free_port(),
            host=link.inner_ip,
            wrapper=link.exec_prefix,
            extra_args=("--protected-mode", "no"),
        )
        server.start()
        try:
            seed(server.url)
            yield link, server
        finally:
            server.close()


def print_table(phases: list[Phase]) -> None:
    print(
        f"{'hedge':>6} {'circuit':>11} {'loss':>8} {'dropped':>8} {'polls':>6} "
        f"{'degraded':>9} {'circuit open':>13} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} "
        f"{'hedges/call':>12} {'over budget':>12}"
    )
    for phase in phases:
        print(
            f"{phase.mode.label} {phase.loss:>8} {phase.dropped:>8.1%} {phase.polls:>6} "
            f"{phase.degraded:>9.1%} {phase.circuit_open:>13.1%} {phase.p50_ms:>7.1f} "
            f"{phase.p90_ms:>7.1f} {phase.p99_ms:>7.1f} {phase.hedges_per_call:>12.2f} "
            f"{phase.over_budget:>12}"
        )


async def main(args: argparse.Namespace) -> None:
    protocol = ProtocolSettings()
    modes = [
        # before: no hedge, the circuit as configured
        Mode(0.0, protocol.circuit_failures),
        # a circuit that opens on a failure rate could at best never open
        Mode(0.0, None),
        # after: the hedge as configured
        Mode(RedisSettings().hedge_after_s, protocol.circuit_failures),
    ]
    phases = []
    with lossy_redis() as (link, server):
        for mode in modes:
            phases += await run_mode(
                link, server, mode, (None, args.one_in), seconds=args.seconds, rate=args.rate
            )
    print(
        f"{args.seconds:g} s per phase at {args.rate:g} polls/s; order_tags' Redis deadline "
        f"{RedisSettings().command_deadline_s * 1000:g} ms, the poll's "
        f"{protocol.tags_deadline_s * 1000:g} ms"
    )
    print_table(phases)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=200.0, help="polls per second")
    parser.add_argument("--one-in", type=int, default=10, help="one packet in this many lost")
    asyncio.run(main(parser.parse_args()))

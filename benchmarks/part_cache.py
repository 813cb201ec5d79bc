"""Benchmark: the shared part cache (docs/protocol.md: Part endpoints, stage 4), in one run:

1. compression of real part bodies (every tag_defined taxi part of orders in every status,
   as the emulator builds them): none vs zlib levels, bytes and CPU per part;
2. orders_state CPU per part request answered from the shared cache, from the upstream with
   the cache on (a miss: the read, the call and the write), and from the upstream with the
   cache off (a second orders_state), the same orders side by side;
3. Redis memory per active order for the part cache (every taxi part fetched once by its
   user, the default TTL), and what 1M active orders take.

Both orders_state processes run on CPU 0; the client, Redis, order_tags and the emulator on
CPU 1. The memos are off, so every request is either a shared-cache hit or an upstream call.

    python benchmarks/part_cache.py [--orders 600] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import urllib.request
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import psutil
import redis

from devtools.bench_stack import Stack, post_json, upstream_stack
from devtools.serve import serve_args
from emulator.documents import lifecycle
from services.bff.config import PART_CACHE_ZLIB_LEVEL
from shared.embedded_redis import free_port
from shared.policy import load_policy

HEADERS = {"Accept-Language": "ru-RU", "User-Agent": "yandex-taxi/5.1 iPhone"}
LEVELS = (0, 1, 3, 6, 9)


def create_orders(stack: Stack, count: int, prefix: str, status: str = "driving") -> list[str]:
    """One order of its own user each: `<prefix><i>` owns the i-th."""
    orderids = []
    for index in range(count):
        body = {"user_id": f"{prefix}{index}", "service": "taxi", "status": status}
        created = post_json(f"{stack.emulator_url}/emulator/v1/orders", json.dumps(body).encode())
        orderids.append(json.loads(created)["orderid"])
    return orderids


def part_urls() -> list[tuple[str, str]]:
    return [
        (rule.part_name, rule.url)
        for rule in load_policy().services["taxi"].rules
        if rule.tag_defined
    ]


async def fetch_all(
    base: str, requests: list[tuple[str, str, str]], concurrency: int
) -> list[dict[str, Any]]:
    """Each (user, order, url) once, `concurrency` at a time; the answered parts."""
    semaphore = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one(user: str, orderid: str, url: str) -> dict[str, Any]:
            async with semaphore:
                body = {"orders": [{"orderid": orderid}], "format_currency": True}
                async with session.post(
                    base + url, json=body, headers={"X-Yandex-UID": user, **HEADERS}
                ) as resp:
                    assert resp.status == 200, await resp.text()
                    answered: dict[str, Any] = (await resp.json())["orders"][0]
                    return answered

        return list(await asyncio.gather(*(one(*request) for request in requests)))


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def upstream_calls(stack: Stack) -> int:
    """Every part upstream call the emulator served (order sources are not asked here)."""
    with urllib.request.urlopen(f"{stack.emulator_url}/emulator/v1/stats", timeout=5) as resp:
        stats = json.loads(resp.read())
    return sum(int(count) for count in stats["calls"].values())


def compression(bodies: list[bytes], repeat: int = 20) -> None:
    print(f"compression of {len(bodies)} real part bodies (fields as kept, JSON):")
    plain = sum(len(body) for body in bodies)
    median = statistics.median(len(body) for body in bodies)
    print(f"  mean part {plain / len(bodies):.0f} bytes, median {median:.0f}")
    for level in LEVELS:
        packed = [zlib.compress(body, level) if level else body for body in bodies]
        started = time.perf_counter()
        for _ in range(repeat):
            for body in bodies:
                if level:
                    zlib.compress(body, level)
        packed_s = (time.perf_counter() - started) / repeat
        started = time.perf_counter()
        for _ in range(repeat):
            for data in packed:
                if level:
                    zlib.decompress(data)
        unpacked_s = (time.perf_counter() - started) / repeat
        size = sum(len(data) for data in packed)
        name = f"zlib {level}" if level else "none"
        print(
            f"  {name:7s} {size / len(bodies):6.0f} bytes/part ({size / plain:.2f}), "
            f"compress {packed_s / len(bodies) * 1e6:5.1f} us, "
            f"decompress {unpacked_s / len(bodies) * 1e6:5.1f} us per part"
        )
    try:
        import zstandard  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        print("  zstd: not importable without a new dependency (not measured)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--orders", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    parts = part_urls()
    fast_info = dict(parts)["fast_info"]

    with upstream_stack(cpu=1) as stack:
        # the memos off: every request is a shared-cache hit or an upstream call
        protocol: dict[str, Any] = {
            "part_fetches": {"coalesce": False, "recent_memo_bytes": 0, "degraded_memo_bytes": 0}
        }
        cached_port, plain_port = free_port(), free_port()
        stack.env["ORDERS_STATE_PORT"] = str(cached_port)
        stack.start(
            serve_args("services.orders_state", {"protocol": protocol}),
            0,
            f"http://127.0.0.1:{cached_port}/ping",
        )
        cached_process = psutil.Process(stack.processes[-1].pid)
        stack.env["ORDERS_STATE_PORT"] = str(plain_port)
        off = {**protocol, "part_cache": {"enabled": False}}
        stack.start(
            serve_args("services.orders_state", {"protocol": off}),
            0,
            f"http://127.0.0.1:{plain_port}/ping",
        )
        plain_process = psutil.Process(stack.processes[-1].pid)
        cached, plain = f"http://127.0.0.1:{cached_port}", f"http://127.0.0.1:{plain_port}"
        client = redis.Redis.from_url(stack.redis.url)

        # 1. real part bodies: every tag_defined part of an order in every taxi status
        samples: list[tuple[str, str, str]] = []
        for status in lifecycle("taxi"):
            for index, orderid in enumerate(create_orders(stack, 4, f"sample-{status}-", status)):
                samples += [(f"sample-{status}-{index}", orderid, url) for _, url in parts]
        answered = asyncio.run(fetch_all(plain, samples, args.concurrency))
        bodies = [
            json.dumps({k: v for k, v in part.items() if k not in ("orderid", "tag")}).encode()
            for part in answered
            if "tag" in part
        ]
        compression(bodies)
        print(f"  the services keep parts with zlib level {PART_CACHE_ZLIB_LEVEL}")

        # 2. CPU per part request: the same orders, each once per way
        orderids = create_orders(stack, args.orders, "cpu-")
        requests = [(f"cpu-{index}", orderid, fast_info) for index, orderid in enumerate(orderids)]
        # warm both processes (connections, code paths) on orders of their own
        warm = create_orders(stack, 50, "warm-")
        asyncio.run(
            fetch_all(cached, [(f"warm-{i}", o, fast_info) for i, o in enumerate(warm)] * 2, 4)
        )
        asyncio.run(fetch_all(plain, [(f"warm-{i}", o, fast_info) for i, o in enumerate(warm)], 4))
        results: dict[str, tuple[float, int]] = {}
        for name, base, process in (
            ("upstream, cache off", plain, plain_process),
            ("upstream, cache miss", cached, cached_process),
            ("shared cache hit", cached, cached_process),
        ):
            calls, cpu = upstream_calls(stack), cpu_seconds(process)
            asyncio.run(fetch_all(base, requests, args.concurrency))
            results[name] = (cpu_seconds(process) - cpu, upstream_calls(stack) - calls)
        print(f"\norders_state CPU per fast_info request, {args.orders} orders each way:")
        for name, (cpu, calls) in results.items():
            print(
                f"  {name:21s} {cpu / args.orders * 1000:.3f} ms CPU/request, "
                f"{calls} upstream calls"
            )
        hit = results["shared cache hit"][0]
        print(
            f"  hit / upstream (cache off) {hit / results['upstream, cache off'][0]:.2f}, "
            f"hit / miss {hit / results['upstream, cache miss'][0]:.2f}"
        )

        # 3. Redis memory per active order: each of its parts fetched once by its user
        client.memory_purge()
        active = create_orders(stack, args.orders, "mem-")
        before = int(client.info("memory")["used_memory"])
        fetches = [(f"mem-{i}", o, url) for i, o in enumerate(active) for _, url in parts]
        asyncio.run(fetch_all(cached, fetches, args.concurrency))
        used = int(client.info("memory")["used_memory"]) - before
        keys = [key for key in client.scan_iter("parts:*", count=1000)]
        sizes = [int(client.memory_usage(key) or 0) for key in keys[:200]]
        per_order = used / args.orders
        print(
            f"\nRedis memory for the part cache: {per_order:.0f} bytes per active order "
            f"({len(parts)} parts, one device; used_memory delta over {args.orders} orders), "
            f"MEMORY USAGE of an order's hash {statistics.mean(sizes):.0f} bytes; "
            f"1M active orders: {per_order * 1e6 / 2**30:.2f} GiB"
        )
        client.close()


if __name__ == "__main__":
    main()

"""Benchmark: what publishing costs a tag write. The same `RedisTagStore.set` (one Lua script:
the writes, then SPUBLISH of the parts that changed on the order's channel) with publishing on
and off, rounds interleaved, against one embedded Redis, with a subscriber listening on
every channel written (the case of a waiting poll on each order, the costliest).

    python benchmarks/order_tags_publish.py [--seconds 3] [--rounds 3]

Prints sets per second for each and the ratio (publish on ÷ off; 1.0 = free).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvloop

from services.order_tags.storage import RedisTagStore
from shared.config import RedisSettings
from shared.embedded_redis import EmbeddedRedis
from shared.redis import create_redis, tags_channel

ORDERS = 200
CONCURRENCY = 32


async def writes_per_second(store: RedisTagStore, seconds: float) -> float:
    done = 0
    ends = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        nonlocal done
        n = 0
        while time.perf_counter() < ends:
            orderid = f"bench-{(index * 7 + n) % ORDERS}"
            await store.set("taxi", orderid, {"fast_info": f"v{n}-{index}"}, only_if_absent=False)
            n += 1
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))
    return done / (time.perf_counter() - started)


async def main(seconds: float, rounds: int) -> None:
    redis_server = EmbeddedRedis()
    redis_server.start()
    try:
        settings = RedisSettings(url=redis_server.url, command_deadline_s=5.0)
        client = create_redis(settings)
        listener = create_redis(settings)
        pubsub = listener.pubsub()
        channels = [tags_channel("taxi", f"bench-{i}") for i in range(ORDERS)]
        for start in range(0, ORDERS, 50):
            await pubsub.ssubscribe(*channels[start : start + 50])
        received = 0

        async def drain() -> None:
            nonlocal received
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None:
                    received += 1

        reader = asyncio.create_task(drain())
        stores = {
            "publish on": RedisTagStore(client, ttl_s=3600, deadline_s=5.0, publish=True),
            "publish off": RedisTagStore(client, ttl_s=3600, deadline_s=5.0, publish=False),
        }
        results: dict[str, list[float]] = {name: [] for name in stores}
        for _ in range(rounds):
            for name, store in stores.items():
                results[name].append(await writes_per_second(store, seconds))
        reader.cancel()
        best = {name: max(values) for name, values in results.items()}
        for name, values in results.items():
            print(f"{name:<12} sets/s per round: {', '.join(f'{v:,.0f}' for v in values)}")
        ratio = best["publish on"] / best["publish off"]
        print(f"messages received by the subscriber: {received:,}")
        print(f"ratio publish on / off (best rounds): {ratio:.3f}")
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await listener.aclose()
        await client.aclose()
    finally:
        redis_server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(main(args.seconds, args.rounds))

"""Benchmark: a batch `get` of 3 orders through the order_tags service, against a bare aiohttp
handler doing the same Redis pipeline, side by side in one run.

Each server runs on one core (CPU 0), the load generator on the other. Redis commands per
request come from INFO commandstats; Redis read events per request (`total_reads_processed`)
show one round trip per batch.

    python benchmarks/order_tags_get.py [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.loadgen import LoadResult, bench_args, round_ratios, run_load
from devtools.bench_stack import wait_http
from shared.embedded_redis import EmbeddedRedis, free_port
from shared.redis import tags_key

TOKEN = "bench-token"
ORDERS = [("taxi", "bench-1"), ("taxi", "bench-2"), ("eats", "bench-3")]
BODY = (
    b'{"orders": ['
    + b",".join(b'{"service": "%s", "orderid": "%s"}' % (s.encode(), o.encode()) for s, o in ORDERS)
    + b"]}"
)

BARE_SERVER = """
import sys, msgspec, uvloop, asyncio
from aiohttp import web
from redis.asyncio import Redis
from shared.config import RedisSettings
from shared.redis import create_redis

class Key(msgspec.Struct):
    service: str
    orderid: str

class Req(msgspec.Struct):
    orders: list[Key]

decoder = msgspec.json.Decoder(Req)
encoder = msgspec.json.Encoder()
REDIS = web.AppKey("redis", Redis)

async def get(request):
    body = decoder.decode(await request.read())
    pipe = request.app[REDIS].pipeline(transaction=False)
    for o in body.orders:
        pipe.hgetall(f"tags:{{{o.service}:{o.orderid}}}")
    results = await pipe.execute()
    out = {"orders": [{"service": o.service, "orderid": o.orderid, "tags": t or None}
                      for o, t in zip(body.orders, results)]}
    return web.Response(body=encoder.encode(out), content_type="application/json")

async def redis_ctx(app):
    # the same client settings as the service's factory: timeouts, no hidden retries
    app[REDIS] = create_redis(RedisSettings(), sys.argv[2])
    yield
    await app[REDIS].aclose()

app = web.Application()
app.cleanup_ctx.append(redis_ctx)
app.router.add_post("/v1/tags/get", get)
loop = uvloop.new_event_loop()
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None, loop=loop)
"""


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # CPU 0 for the server under test; the load generator takes CPU 1
    return subprocess.Popen(["taskset", "-c", "0", *args], env=env)


def measure(port: int, seconds: float, headers: dict[str, str], connections: int) -> LoadResult:
    return asyncio.run(
        run_load(
            port, "/v1/tags/get", BODY, headers=headers, seconds=seconds, connections=connections
        )
    )


def main() -> None:
    args = bench_args(__doc__)

    server = EmbeddedRedis()
    server.start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    for service, orderid in ORDERS:
        client.hset(tags_key(service, orderid), mapping={"fast_info": "v1", "chat": "c1"})

    service_port, bare_port = free_port(), free_port()
    env = dict(
        os.environ,
        MLUTP_SERVICE_TOKEN=TOKEN,
        REDIS_URL=server.url,
        ORDER_TAGS_PORT=str(service_port),
        LOG_LEVEL="WARNING",
    )
    processes = [
        start([sys.executable, "-m", "services.order_tags"], env),
        start([sys.executable, "-c", BARE_SERVER, str(bare_port), server.url], env),
    ]
    try:
        wait_http(f"http://127.0.0.1:{service_port}/ping")
        wait_http(f"http://127.0.0.1:{bare_port}/v1/tags/get")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        measure(service_port, 1.0, auth, args.connections)  # warm-up
        measure(bare_port, 1.0, {}, args.connections)
        totals = {"service": LoadResult(), "bare": LoadResult()}
        rounds: list[tuple[LoadResult, LoadResult]] = []
        for round_no in range(args.rounds):
            this_round: dict[str, LoadResult] = {}
            for name, port, headers in (("service", service_port, auth), ("bare", bare_port, {})):
                client.config_resetstat()
                result = measure(port, args.seconds, headers, args.connections)
                stats = client.info("commandstats")
                reads = client.info("stats")["total_reads_processed"]
                hgetall = stats.get("cmdstat_hgetall", {}).get("calls", 0)
                print(
                    f"round {round_no + 1} {result.line(name)}  "
                    f"redis cmds/req {hgetall / max(result.requests, 1):.2f}  "
                    f"redis reads/req {reads / max(result.requests, 1):.2f}"
                )
                totals[name].add(result)
                this_round[name] = result
            rounds.append((this_round["service"], this_round["bare"]))
        ratio = totals["service"].rps / totals["bare"].rps
        print(
            f"\norder_tags service {totals['service'].rps:.0f} rps, bare handler "
            f"{totals['bare'].rps:.0f} rps, ratio {ratio:.2f} (goal >= 0.8, >= 4000 rps)"
        )
        print(round_ratios(rounds))
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)
        server.close()


if __name__ == "__main__":
    main()

"""Benchmark: POST /mlutp/v1/orders/state with 3 known orders of 2 services, against a bare
aiohttp+msgspec handler making the same upstream calls (2 order sources + 1 tags get) to the
same emulator and order_tags, side by side in one run.

The server under test runs on CPU 0; the load generator, Redis, order_tags and the emulator
share CPU 1. Reports rps, the ratio, p50/p99 latency and Redis commands and reads per poll.

    python benchmarks/orders_state.py [--seconds 5] [--rounds 3] [--connections 16]
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.loadgen import LoadResult, bench_args, round_ratios, run_load
from devtools.bench_stack import TOKEN, post_json, upstream_stack, wait_http
from shared.embedded_redis import free_port
from shared.policy import load_policy
from shared.protocol.tags import encode_tag
from shared.redis import tags_key

USER = "bench-user"
PATH = "/mlutp/v1/orders/state"

BARE_SERVER = """
import asyncio, sys, aiohttp, msgspec, uvloop
from typing import Any
from aiohttp import web

SOURCES = sys.argv[2].split(",")
TAGS_URL = sys.argv[3]
TOKEN = sys.argv[4]
decoder = msgspec.json.Decoder(dict[str, Any])
encoder = msgspec.json.Encoder()
SESSION = web.AppKey("session", aiohttp.ClientSession)

async def state(request):
    body = decoder.decode(await request.read())
    session = request.app[SESSION]
    uid = {"X-Yandex-UID": request.headers["X-Yandex-UID"]}
    async def source(url):
        async with session.post(url, data=b"{}",
                                headers={**uid, "Content-Type": "application/json"}) as r:
            return decoder.decode(await r.read())
    results = await asyncio.gather(*(source(u) for u in SOURCES))
    orders = [{"service": s, "orderid": o["orderid"]}
              for s, res in zip(("taxi", "eats"), results) for o in res["orders"]]
    async with session.post(TAGS_URL, data=encoder.encode({"orders": orders}),
                            headers={"Authorization": "Bearer " + TOKEN,
                                     "Content-Type": "application/json"}) as r:
        tags = decoder.decode(await r.read())
    out = {"orders": [{**o, "tags": t["tags"], "need_request": [], "update_status": "actual"}
                      for o, t in zip(orders, tags["orders"])], "allowed_changes": []}
    return web.Response(body=encoder.encode(out), content_type="application/json",
                        headers={"X-Yataxi-Polling-Interval-Ms": "3000"})

async def session_ctx(app):
    app[SESSION] = aiohttp.ClientSession()
    yield
    await app[SESSION].close()

app = web.Application()
app.cleanup_ctx.append(session_ctx)
app.router.add_post("/mlutp/v1/orders/state", state)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None,
            loop=uvloop.new_event_loop())
"""


def main() -> None:
    args = bench_args(__doc__, connections=16)
    policy = load_policy()

    with upstream_stack(cpu=1) as stack:
        emulator = stack.emulator_url
        known = []
        for service in ("taxi", "taxi", "eats"):
            created = json.loads(
                post_json(
                    f"{emulator}/emulator/v1/orders",
                    json.dumps({"user_id": USER, "service": service}).encode(),
                )
            )
            known.append((service, created["orderid"]))
        client = redis.Redis.from_url(stack.redis.url, decode_responses=True)
        known_orders = []
        for service, orderid in known:
            stored: dict[str, str] = client.hgetall(tags_key(service, orderid))  # type: ignore[assignment]
            # the steady state: the client holds a valid tag for every part
            tags = {
                rule.part_name: encode_tag(policy.version(service), stored.get(rule.part_name), 0)
                for rule in policy.services[service].rules
                if rule.tag_defined
            }
            known_orders.append(
                {"orderid": orderid, "service": service, "status": "x", "tags": tags}
            )
        body = json.dumps({"known_orders": known_orders}).encode()

        bff_port, bare_port = free_port(), free_port()
        stack.env["ORDERS_STATE_PORT"] = str(bff_port)
        stack.start(["-m", "services.orders_state"], 0, f"http://127.0.0.1:{bff_port}/ping")
        sources = (
            f"{emulator}/sources/taxi/v1/orders/active,{emulator}/sources/eats/v1/orders/active"
        )
        stack.start(
            [
                "-c",
                BARE_SERVER,
                str(bare_port),
                sources,
                f"{stack.order_tags_url}/v1/tags/get",
                TOKEN,
            ],
            0,
        )
        wait_http(f"http://127.0.0.1:{bare_port}/")
        response = json.loads(
            post_json(f"http://127.0.0.1:{bff_port}{PATH}", body, {"X-Yandex-UID": USER})
        )
        assert [o["need_request"] for o in response["orders"]] == [[], [], []], response

        headers = {"X-Yandex-UID": USER}

        def measure(port: int, seconds: float) -> LoadResult:
            return asyncio.run(
                run_load(
                    port, PATH, body, headers=headers, seconds=seconds, connections=args.connections
                )
            )

        measure(bff_port, 1.0)
        measure(bare_port, 1.0)
        totals = {"orders_state": LoadResult(), "bare": LoadResult()}
        rounds: list[tuple[LoadResult, LoadResult]] = []
        for round_no in range(args.rounds):
            this_round: dict[str, LoadResult] = {}
            for name, port in (("orders_state", bff_port), ("bare", bare_port)):
                client.config_resetstat()
                result = measure(port, args.seconds)
                commands = sum(
                    v["calls"]
                    for k, v in client.info("commandstats").items()
                    if k != "cmdstat_config|resetstat"
                )
                reads = client.info("stats")["total_reads_processed"]
                print(
                    f"round {round_no + 1} {result.line(name)}  "
                    f"redis cmds/poll {commands / max(result.requests, 1):.2f}  "
                    f"reads/poll {reads / max(result.requests, 1):.2f}"
                )
                totals[name].add(result)
                this_round[name] = result
            rounds.append((this_round["orders_state"], this_round["bare"]))
        bff, bare = totals["orders_state"], totals["bare"]
        print(
            f"\norders_state {bff.rps:.0f} rps (p50 {bff.percentile(0.5) * 1000:.2f} ms, "
            f"p99 {bff.percentile(0.99) * 1000:.2f} ms), bare {bare.rps:.0f} rps "
            f"(p50 {bare.percentile(0.5) * 1000:.2f} ms, "
            f"p99 {bare.percentile(0.99) * 1000:.2f} ms), "
            f"ratio {bff.rps / bare.rps:.2f} (goal >= 0.8)"
        )
        print(round_ratios(rounds))


if __name__ == "__main__":
    main()

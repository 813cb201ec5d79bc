"""Benchmark: what a poll with nothing new costs, list tags on against off, and with the tag
reads of concurrent polls joined into one order_tags call against one call each, side by side
in one run, next to the legacy pass-through and `GET /ping` on the same stack.

A superapp client: one driving taxi order known with every tag current, and taxi, eats and
grocery queried (docs/protocol.md: List tags). For each setting (orders_state's `list_tags`,
`tag_reads`' `join` and `in_flight`) a stack of its own: U users, a warm-up
poll each (it keeps the sources' answers and gives the answer's answer_tag), then N requests of
each kind, 20 at a time, measured by the CPU the processes used (psutil; Redis by its own INFO)
and the order source calls the emulator served. `poll` is answered in full; `poll 204` sends
the warm-up answer's answer_tag back in its body, as the reference client does, and gets a
204 No Content.

And the bytes of one exchange with nothing new, both ways, as client.wire_bytes counts them
(bodies through a gzipping gateway, header blocks as HTTP/1.1 text): the 204 as the client
makes it now, beside the 304 it made before (the answer_tag out of the body, If-None-Match
and the ETag, 64 bits in hex and quoted, in the header blocks: the rest of both blocks read
off the same 204), and the 200 in full.

    python benchmarks/nothing_new.py [--users 200] [--requests 3000] [--concurrency 20]
    python benchmarks/nothing_new.py --bytes-only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import redis.asyncio as aioredis
import uvloop

from benchmarks.capacity import PROCESSES, SUPERAPP, Cost, measure
from benchmarks.users import caught_up_users
from client.wire_bytes import WireBytes, request_line, status_line
from devtools.stack import STACK, free_ports_env, own_stack


async def source_calls(session: aiohttp.ClientSession, emulator: str) -> int:
    async with session.get(f"{emulator}/emulator/v1/stats") as response:
        calls: dict[str, int] = (await response.json())["calls"]
    return sum(count for target, count in calls.items() if target.startswith("source:"))


STATE_PATH = "/mlutp/v1/orders/state"
# what the old exchange carried in its header blocks instead: an ETag of 64 bits, in hex, quoted
OLD_ETAG = '"' + "0" * 16 + '"'


def _total(exchange: tuple[WireBytes, WireBytes]) -> int:
    request, answer = exchange
    return request.body_gzip + request.headers + answer.body_gzip + answer.headers


async def exchange_bytes(
    session: aiohttp.ClientSession, state: str, user: str, body: dict[str, Any]
) -> dict[str, tuple[WireBytes, WireBytes]]:
    """(request, answer) bytes of a poll answered in full, of the 204 that follows it, and of
    the 304 that followed it before: the same exchange, its answer_tag in If-None-Match and
    the answer's ETag instead."""
    headers = {"X-Yandex-UID": user, "Content-Type": "application/json"}
    measured: dict[str, tuple[WireBytes, WireBytes]] = {}
    tag = ""
    for name in ("200", "204"):
        sent = json.dumps({**body, "answer_tag": tag} if tag else body).encode()
        async with session.post(f"{state}{STATE_PATH}", data=sent, headers=headers) as r:
            payload = await r.read()
            assert r.status == int(name), (r.status, payload)
            sent_headers = list(r.request_info.headers.items())
            answer_headers = list(r.raw_headers)
            measured[name] = (
                WireBytes.of(
                    request_line("POST", STATE_PATH), sent_headers, sent, gzip_if_smaller=True
                ),
                WireBytes.of(status_line(r.status, r.reason), answer_headers, payload),
            )
        if name == "200":
            tag = json.loads(payload)["answer_tag"]
    old_sent = json.dumps(body).encode()
    old_headers = [
        (k, str(len(old_sent)) if k.lower() == "content-length" else v) for k, v in sent_headers
    ]
    measured["304 (before)"] = (
        WireBytes.of(
            request_line("POST", STATE_PATH),
            [*old_headers, ("If-None-Match", OLD_ETAG)],
            old_sent,
            gzip_if_smaller=True,
        ),
        WireBytes.of(
            status_line(304, "Not Modified"), [*answer_headers, (b"ETag", OLD_ETAG.encode())], b""
        ),
    )
    return measured


def print_bytes(measured: dict[str, tuple[WireBytes, WireBytes]]) -> None:
    print("one poll's bytes, both ways (gzip gateway; headers as HTTP/1.1 text):")
    print(
        f"{'exchange':<14}{'req body':>10}{'req headers':>13}{'resp body':>11}"
        f"{'resp headers':>14}{'total':>8}"
    )
    for name, (request, answer) in measured.items():
        print(
            f"{name:<14}{request.body_gzip:>10}{request.headers:>13}{answer.body_gzip:>11}"
            f"{answer.headers:>14}{_total((request, answer)):>8}"
        )


# orders_state's protocol settings of each run
SETTINGS: dict[str, dict[str, Any]] = {
    "joined reads": {"list_tags": True, "tag_reads": {"join": True}},
    # joined only within a turn of the loop: no read waits for a call in flight
    "turn only": {"list_tags": True, "tag_reads": {"join": True, "in_flight": 0}},
    "read each": {"list_tags": True, "tag_reads": {"join": False}},
    "no list tags": {"list_tags": False, "tag_reads": {"join": True}},
}


async def run(
    setting: dict[str, Any], users: int, requests: int, concurrency: int
) -> dict[str, Any]:
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": "ERROR"}
    env |= {"EMULATOR_DRIVER_ENABLED": "false"}
    # what a request costs, not admission control
    protocol = {**setting, "admission": {"min_polls_in_flight": 2000}}
    env.pop("REDIS_URL", None)
    services = [s for s in STACK if s.name in PROCESSES]
    settings = {"orders_state": {"protocol": protocol}}
    async with own_stack(env, services, settings) as stack:
        emulator, state = stack.url("emulator"), stack.url("orders_state")
        redis = aioredis.Redis.from_url(stack.env["REDIS_URL"], decode_responses=True)
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=30)
        ) as session:
            orders, bodies = await caught_up_users(session, emulator, redis, users, "nothing-new")

            async def post(url: str, user: str, body: dict[str, Any]) -> int:
                async with session.post(url, json=body, headers={"X-Yandex-UID": user}) as r:
                    payload = await r.read()
                    assert r.status == 200, payload
                    return len(payload)

            tags: dict[str, str] = {}

            async def poll(index: int, *, revalidate: bool = False) -> int:
                user, _ = orders[index % users]
                body: dict[str, Any] = {
                    "known_orders": [bodies[index % users]],
                    "supported_services": SUPERAPP,
                }
                if revalidate:
                    body["answer_tag"] = tags[user]
                async with session.post(
                    f"{state}{STATE_PATH}", json=body, headers={"X-Yandex-UID": user}
                ) as r:
                    payload = await r.read()
                    assert r.status == (204 if revalidate else 200), (r.status, payload)
                    if not revalidate:
                        tags[user] = json.loads(payload)["answer_tag"]
                    return len(payload)

            def poll_204(index: int) -> Awaitable[int]:
                return poll(index, revalidate=True)

            def legacy(index: int) -> Awaitable[int]:
                user, orderid = orders[index % users]
                return post(f"{state}/3.0/taxiontheway", user, {"orderid": orderid})

            async def ping(index: int) -> int:
                async with session.get(f"{state}/ping") as r:
                    return len(await r.read())

            # warm-up: one poll per user (each source asked once, its answer kept)
            await measure(stack, redis, users, concurrency, poll)
            user, _ = orders[0]
            body = {"known_orders": [bodies[0]], "supported_services": SUPERAPP}
            wire = await exchange_bytes(session, state, user, body)
            if not requests:
                await redis.aclose()
                return {"bytes": wire}
            before = await source_calls(session, emulator)
            costs = {"poll": await measure(stack, redis, requests, concurrency, poll)}
            costs["poll 204"] = await measure(stack, redis, requests, concurrency, poll_204)
            polled_sources = await source_calls(session, emulator) - before
            costs["legacy"] = await measure(stack, redis, requests, concurrency, legacy)
            costs["ping"] = await measure(stack, redis, requests, concurrency, ping)
        await redis.aclose()
    return {
        "costs": costs,
        "source_calls_per_poll": polled_sources / (2 * requests),
        "bytes": wire,
    }


def bff_ms(cost: Cost) -> float:
    """orders_state + order_tags + Redis: every process of the BFF, per request."""
    parts = ("orders_state", "order_tags", "redis")
    return sum(cost.per_request(cost.cpu_s[p]) for p in parts) * 1000


async def main(users: int, requests: int, concurrency: int, bytes_only: bool) -> None:
    if bytes_only:
        print_bytes((await run(SETTINGS["joined reads"], users, 0, concurrency))["bytes"])
        return
    results = {
        name: await run(setting, users, requests, concurrency) for name, setting in SETTINGS.items()
    }
    print(f"{users} users, a superapp poll ({', '.join(SUPERAPP)}) with nothing new; ", end="")
    print(f"{requests} requests of each kind, {concurrency} at a time; CPU ms per request")
    head = (
        f"{'setting':<14}{'request':<10}{'orders_state':>13}{'order_tags':>12}{'redis':>8}"
        f"{'sources':>9}{'BFF total':>11}{'source calls':>14}"
    )
    print(head)
    for setting, result in results.items():
        for kind, cost in result["costs"].items():
            calls = f"{result['source_calls_per_poll']:.3f}" if kind == "poll" else ""
            print(
                f"{setting:<14}{kind:<10}"
                f"{cost.per_request(cost.cpu_s['orders_state']) * 1000:>13.3f}"
                f"{cost.per_request(cost.cpu_s['order_tags']) * 1000:>12.3f}"
                f"{cost.per_request(cost.cpu_s['redis']) * 1000:>8.3f}"
                f"{cost.per_request(cost.cpu_s['emulator']) * 1000:>9.3f}"
                f"{bff_ms(cost):>11.3f}{calls:>14}"
            )
    on, turn, each, off = (results[s]["costs"] for s in SETTINGS)
    print(
        f"\npoll BFF CPU, list tags / none: {bff_ms(on['poll']) / bff_ms(off['poll']):.2f}; "
        f"joined reads / read each: {bff_ms(on['poll']) / bff_ms(each['poll']):.2f}; "
        f"joined / joined within a turn only: {bff_ms(on['poll']) / bff_ms(turn['poll']):.2f}; "
        f"poll 204 / poll: {bff_ms(on['poll 204']) / bff_ms(on['poll']):.2f}; "
        f"poll / legacy pass-through (same run): "
        f"{bff_ms(on['poll']) / bff_ms(on['legacy']):.2f}; "
        f"poll / ping: {bff_ms(on['poll']) / bff_ms(on['ping']):.1f}; "
        f"poll 204 / legacy pass-through: {bff_ms(on['poll 204']) / bff_ms(on['legacy']):.2f}"
    )
    print()
    print_bytes(results["joined reads"]["bytes"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--bytes-only", action="store_true", help="one stack, the bytes alone")
    args = parser.parse_args()
    uvloop.run(main(args.users, args.requests, args.concurrency, args.bytes_only))

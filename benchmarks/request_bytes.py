"""Benchmark: the bytes of a poll with nothing new, the request's ways of getting smaller side by
side (issue 48's "fewer bytes up"), counted as TCP payload both ways through a counting proxy
in front of orders_state: HTTP/1.1, headers included, as aiohttp's client writes them.

The reference client (client.MlutpClient) launches and polls a taxi order through the stack
until it is caught up; then the poll it would send next (its known orders as it echoes them,
`supported_services`, `policy_versions`, the held `answer_tag`) goes out N times each way:

- `plain`: as the client sent it before request bodies were gzipped;
- `gzip`: the same body with `Content-Encoding: gzip` (what the client sends now, above its
  threshold; docs/protocol.md: Request bodies);
- `no echo`: without the brief echo fields of each known order (the server needs them only
  to answer a stale order, which the client could fill in itself);
- `no echo + gzip`: both;
- `digest`: the same poll as the reference clients repeat it, `{"request_digest": d}` of the
  full body sent before it (docs/protocol.md: The digest request), answered by the server as
  that body: its 204 counted as it came.

Each row: bytes up, bytes down, the request body alone (over HTTP/2 a repeated request's
headers shrink to a few bytes of HPACK indexes, so the body is most of what goes up).

    python benchmarks/request_bytes.py [--orders 1] [--exchanges 20] [--wait-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import uvloop

from benchmarks.capacity import PROCESSES, SUPERAPP
from client.client import MlutpClient
from client.model import ClientOptions
from client.store import known_orders
from client.transport import request_digest
from devtools.stack import STACK, free_ports_env, own_stack
from shared.embedded_redis import free_port

STATE_PATH = "/mlutp/v1/orders/state"
SERVICES = ("taxi", "eats", "grocery")
# a status each, of an order in progress
STATUSES = {"taxi": "driving", "eats": "cooking", "grocery": "assembling"}


@dataclass
class Counted:
    up: int = 0
    down: int = 0


class CountingProxy:
    """TCP payload both ways between the client and one upstream, as the kernel carried it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.counted = Counted()
        self.port = free_port()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> CountingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            while data := await src.read(65536):
                if up:
                    self.counted.up += len(data)
                else:
                    self.counted.down += len(data)
                dst.write(data)
                await dst.drain()
            dst.close()

        await asyncio.gather(
            pipe(reader, up_writer, True), pipe(up_reader, writer, False), return_exceptions=True
        )


def without_echo(body: dict[str, Any]) -> dict[str, Any]:
    kept = ("orderid", "service", "status", "tags", "version", "created_at", "force")
    return {
        **body,
        "known_orders": [{k: v for k, v in o.items() if k in kept} for o in body["known_orders"]],
    }


def digest_body(body: dict[str, Any]) -> dict[str, Any]:
    """The digest request standing for this body as `encoded` sends it (plain or gzipped: the
    digest is of the JSON before the gzip)."""
    return {"request_digest": request_digest(json.dumps(body).encode())}


async def exchange(
    session: aiohttp.ClientSession,
    proxy: CountingProxy,
    url: str,
    headers: dict[str, str],
    body: bytes,
    expect: int,
) -> tuple[int, int]:
    """One exchange's bytes up and down; `expect` its status (0: any)."""
    before = Counted(proxy.counted.up, proxy.counted.down)
    async with session.post(url, data=body, headers=headers) as response:
        payload = await response.read()
        assert expect in (0, response.status), (response.status, payload)
    # the answer is read whole: both counts are final (one request on the connection at once)
    return proxy.counted.up - before.up, proxy.counted.down - before.down


async def run(orders: int, exchanges: int, wait_ms: int) -> None:
    env = {**os.environ, **free_ports_env(), "LOG_LEVEL": "ERROR"}
    env |= {"EMULATOR_DRIVER_ENABLED": "false"}
    env.pop("REDIS_URL", None)
    services = [s for s in STACK if s.name in (*PROCESSES, "launch")]
    user = "request-bytes-1"
    async with own_stack(env, services) as stack, aiohttp.ClientSession() as session:
        emulator = stack.url("emulator")
        for index in range(orders):
            status = STATUSES[SERVICES[index % 3]]
            async with session.post(
                f"{emulator}/emulator/v1/orders",
                json={"user_id": user, "service": SERVICES[index % 3], "status": status},
            ) as response:
                assert response.status == 200, await response.text()
        state_port = int(stack.url("orders_state").rsplit(":", 1)[1])
        async with CountingProxy(state_port) as proxy:
            proxied = f"http://127.0.0.1:{proxy.port}"
            client = MlutpClient(
                session,
                launch_url=f"{stack.url('launch')}/4.0/launch",
                orders_state_url=proxied,
                user_id=user,
                supported_services=SUPERAPP,
                options=ClientOptions(poll_route=False),
            )
            await client.launch()
            for _ in range(3):
                await client.cycle()
            held = client.transport._held[STATE_PATH]
            body: dict[str, Any] = {
                "known_orders": known_orders(client.orders),
                "supported_services": client.supported_services,
                "answer_tag": held[0],
            }
            if client.policy_versions:
                body["policy_versions"] = client.policy_versions
            if wait_ms:
                body["wait_ms"] = wait_ms
            headers = {"X-Yandex-UID": user, "User-Agent": "mlutp-reference-client/1.0"}
            plain_json = {**headers, "Content-Type": "application/json"}
            gzipped = {**plain_json, "Content-Encoding": "gzip"}

            def encoded(value: dict[str, Any], gzip_it: bool) -> bytes:
                raw = json.dumps(value).encode()
                return gzip.compress(raw, 6, mtime=0) if gzip_it else raw

            ways = {
                "plain": (plain_json, encoded(body, False), 204),
                "gzip": (gzipped, encoded(body, True), 204),
                "no echo": (plain_json, encoded(without_echo(body), False), 204),
                "no echo + gzip": (gzipped, encoded(without_echo(body), True), 204),
                # after the rows above sent the full body: the server keeps it for the user
                "digest": (plain_json, encoded(digest_body(body), False), 204),
            }
            url = f"{proxied}{STATE_PATH}"
            rows: dict[str, tuple[float, float, int]] = {}
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as measuring:
                # the connection opened, so no row pays for it
                await exchange(measuring, proxy, url, *ways["plain"])
                for name, (sent_headers, sent, expect) in ways.items():
                    ups, downs = [], []
                    for _ in range(exchanges):
                        up, down = await exchange(measuring, proxy, url, sent_headers, sent, expect)
                        ups.append(up)
                        downs.append(down)
                    rows[name] = (sum(ups) / exchanges, sum(downs) / exchanges, len(sent))
    print(
        f"a caught-up poll, {orders} known order(s), wait_ms {wait_ms}: its plain body "
        f"{rows['plain'][2]} bytes"
    )
    print(f"{'request':<16}{'up':>8}{'down':>8}{'total':>8}{'req body':>10}{'÷ plain':>9}")
    plain_total = rows["plain"][0] + rows["plain"][1]
    for name, (mean_up, mean_down, body_size) in rows.items():
        total = mean_up + mean_down
        print(
            f"{name:<16}{mean_up:>8.0f}{mean_down:>8.0f}{total:>8.0f}{body_size:>10}"
            f"{total / plain_total:>9.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=1, help="known orders (taxi, eats, …)")
    parser.add_argument("--exchanges", type=int, default=20, help="exchanges each way")
    parser.add_argument("--wait-ms", type=int, default=0, help="the polls' wait_ms")
    args = parser.parse_args()
    uvloop.run(run(args.orders, args.exchanges, args.wait_ms))


if __name__ == "__main__":
    main()

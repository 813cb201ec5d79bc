"""Benchmark: the bytes of a part the app already holds (issue 50 item 2; docs/protocol.md:
Part endpoints, `unchanged`), beside the part in full, for each tagged taxi part of a driving
order of the emulator, in the same run. A part request whose tag is current is answered
`{"orderid", "tag", "unchanged": true}` with no upstream call; the upstream calls of both
requests are counted by the emulator. Bodies as sent and gzipped (level 6, as the gateway in
docs/protocol.md: For app developers); an order id of 32 characters, as production's.

    python benchmarks/unchanged_bytes.py
"""

from __future__ import annotations

import gzip
import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.bench_stack import post_json, upstream_stack
from devtools.serve import serve_args
from shared.embedded_redis import free_port
from shared.policy import load_policy

USER = "unchanged-bytes-user"
GZIP_LEVEL = 6


def upstream_calls(emulator: str) -> int:
    with urllib.request.urlopen(f"{emulator}/emulator/v1/stats", timeout=5) as response:
        return sum(json.loads(response.read())["calls"].values())


def gzipped(body: bytes) -> int:
    return len(gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0))


def main() -> None:
    with upstream_stack(cpu=1) as stack:
        emulator = stack.emulator_url
        port = free_port()
        stack.env["ORDERS_STATE_PORT"] = str(port)
        base = f"http://127.0.0.1:{port}"
        stack.start(serve_args("services.orders_state", {}), 0, f"{base}/ping")
        order = {"user_id": USER, "service": "taxi", "status": "driving"}
        created = post_json(f"{emulator}/emulator/v1/orders", json.dumps(order).encode())
        orderid = json.loads(created)["orderid"]
        headers = {"X-Yandex-UID": USER}
        print(f"order id of {len(orderid)} characters; bytes of the answer's body")
        print(
            f"{'part':15s} {'full':>6s} {'gzip':>6s} {'held':>6s} {'gzip':>6s} "
            f"{'held÷full':>10s} {'gzip':>6s} {'calls':>6s}  answered"
        )
        for rule in load_policy().services["taxi"].rules:
            if not rule.tag_defined:
                continue
            url = f"{base}{rule.url}"
            full = post_json(url, json.dumps({"orders": [{"orderid": orderid}]}).encode(), headers)
            tag = json.loads(full)["orders"][0]["tag"]
            before = upstream_calls(emulator)
            held_body = json.dumps({"orders": [{"orderid": orderid, "tag": tag}]}).encode()
            held = post_json(url, held_body, headers)
            calls = upstream_calls(emulator) - before
            [answer] = json.loads(held)["orders"]
            answered = "unchanged" if answer.get("unchanged") else "in full"
            print(
                f"{rule.part_name:15s} {len(full):6d} {gzipped(full):6d} {len(held):6d} "
                f"{gzipped(held):6d} {len(held) / len(full):10.3f} "
                f"{gzipped(held) / gzipped(full):6.3f} {calls:6d}  {answered}"
            )


if __name__ == "__main__":
    main()

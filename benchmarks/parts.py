"""Benchmark: a part endpoint (fast_info, one order) against the legacy totw pass-through of
the same order through the same orders_state, side by side in one run: time and bytes.

orders_state runs on CPU 0; the load generator, Redis, order_tags and the emulator on CPU 1.

    python benchmarks/parts.py [--seconds 5] [--rounds 3] [--connections 16]
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.loadgen import LoadResult, bench_args, run_load
from devtools.bench_stack import post_json, upstream_stack
from devtools.serve import serve_args
from shared.embedded_redis import free_port
from shared.policy import load_policy

USER = "bench-user"


def main() -> None:
    args = bench_args(__doc__, connections=16)
    policy = load_policy()

    with upstream_stack(cpu=1) as stack:
        new_order = {"user_id": USER, "service": "taxi", "status": "driving"}
        created = json.loads(
            post_json(f"{stack.emulator_url}/emulator/v1/orders", json.dumps(new_order).encode())
        )
        orderid = created["orderid"]
        port = free_port()
        stack.env["ORDERS_STATE_PORT"] = str(port)
        # every request here names the same order: joined or remembered fetches would
        # flatter the part endpoint, so each pays its own tag read and upstream call, as
        # distinct orders do
        protocol = {"part_fetches": {"coalesce": False, "recent_memo_bytes": 0}}
        base = f"http://127.0.0.1:{port}"
        stack.start(serve_args("services.orders_state", {"protocol": protocol}), 0, f"{base}/ping")
        headers = {"X-Yandex-UID": USER}

        legacy_body = json.dumps({"orderid": orderid, "format_currency": True}).encode()
        part_body = json.dumps({"orders": [{"orderid": orderid}], "format_currency": True}).encode()
        totw_bytes = len(post_json(f"{base}/3.0/taxiontheway", legacy_body, headers))
        print(f"legacy totw response: {totw_bytes} bytes")
        total = 0
        for rule in policy.services["taxi"].rules:
            if not rule.tag_defined:
                continue
            size = len(post_json(f"{base}{rule.url}", part_body, headers))
            total += size
            print(f"  part {rule.part_name:15s} {size:6d} bytes ({size / totw_bytes:.2f} of totw)")
        print(f"  all tag_defined parts together: {total} bytes ({total / totw_bytes:.2f} of totw)")

        fast_info = policy.services["taxi"].rules[0].url
        targets = (
            ("fast_info part", fast_info, part_body),
            ("legacy totw", "/3.0/taxiontheway", legacy_body),
        )

        def measure(path: str, body: bytes, seconds: float) -> LoadResult:
            return asyncio.run(
                run_load(
                    port, path, body, headers=headers, seconds=seconds, connections=args.connections
                )
            )

        for _, path, body in targets:
            measure(path, body, 1.0)
        totals = {name: LoadResult() for name, _, _ in targets}
        for round_no in range(args.rounds):
            for name, path, body in targets:
                result = measure(path, body, args.seconds)
                print(f"round {round_no + 1} {result.line(name)}")
                totals[name].add(result)
        part, legacy = totals["fast_info part"], totals["legacy totw"]
        print(
            f"\nfast_info part {part.rps:.0f} rps, p50 {part.percentile(0.5) * 1000:.2f} ms; "
            f"legacy totw {legacy.rps:.0f} rps, p50 {legacy.percentile(0.5) * 1000:.2f} ms; "
            f"time ratio part/legacy {legacy.rps / part.rps:.2f}"
        )


if __name__ == "__main__":
    main()

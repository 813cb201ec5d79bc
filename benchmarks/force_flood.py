"""Benchmark: one user forcing and fetching as fast as it can (issue 13's 411 totw calls a
second from one order). Each round polls orders/state with `force: true` and fetches the
order's fast_info and rarely_changed parts, one after another, with no pause. Two
orders_state processes side by side in one run: the defaults (the recent-fetch memo and the
shared part cache in Redis), the shared cache alone (part_fetches.recent_memo_bytes 0), and
neither (part_cache.enabled off too). The calls of each part's upstream (the
order core's and the order settings service's, as the policy names them) are counted by the
emulator; the busier one is reported.

Legacy polling costs one order 0.1–0.2 totw calls a second (every 10 s on Android, every 5 s
on iOS), each a whole document. Bound asserted (the exit status is 1 when it fails): with the
memo, at most one call per upstream per min TTL (2 s), plus one.

    python benchmarks/force_flood.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.bench_stack import post_json, upstream_stack
from devtools.serve import serve_args
from shared.embedded_redis import free_port
from shared.policy import load_policy

USER = "flooding-user"
MIN_TTL_S = 2.0
LEGACY_CALLS_PER_S = (0.1, 0.2)


PARTS = ("fast_info", "rarely_changed")


def upstreams() -> list[str]:
    rules = load_policy().services["taxi"].rules
    return [rule.upstream_name for rule in rules if rule.part_name in PARTS]


def upstream_calls(emulator: str) -> dict[str, int]:
    """Each fetched part's upstream's calls (the emulator names them `part:<name>`)."""
    with urllib.request.urlopen(f"{emulator}/emulator/v1/stats", timeout=5) as response:
        calls = json.loads(response.read())["calls"]
    return {name: calls.get(f"part:{name}", 0) for name in upstreams()}


def flood(base: str, emulator: str, orderid: str, seconds: float) -> tuple[int, int, float]:
    """Rounds as fast as possible for `seconds`: (part requests, the busier upstream's
    calls, seconds)."""
    headers = {"X-Yandex-UID": USER}
    tags: dict[str, str] = {}
    before = upstream_calls(emulator)
    started = time.monotonic()
    requests = 0
    while time.monotonic() - started < seconds:
        known = {"orderid": orderid, "service": "taxi", "status": "driving", "force": True}
        poll = {"known_orders": [{**known, "tags": tags}]}
        post_json(f"{base}/mlutp/v1/orders/state", json.dumps(poll).encode(), headers)
        for part in PARTS:
            body = json.dumps({"orders": [{"orderid": orderid}]}).encode()
            answer = json.loads(post_json(f"{base}/mlutp/v1/taxi/{part}", body, headers))
            tags[part] = answer["orders"][0]["tag"]
            requests += 1
    elapsed = time.monotonic() - started
    after = upstream_calls(emulator)
    return requests, max(after[name] - before[name] for name in after), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    with upstream_stack(cpu=1) as stack:
        emulator = stack.emulator_url
        new_order = {"user_id": USER, "service": "taxi", "status": "driving"}
        orderid = json.loads(
            post_json(f"{emulator}/emulator/v1/orders", json.dumps(new_order).encode())
        )["orderid"]
        bases = {}
        no_memo = {"part_fetches": {"recent_memo_bytes": 0}}
        for name, protocol in (
            ("defaults", {}),
            ("shared cache only", no_memo),
            ("neither", {**no_memo, "part_cache": {"enabled": False}}),
        ):
            port = free_port()
            stack.env["ORDERS_STATE_PORT"] = str(port)
            bases[name] = f"http://127.0.0.1:{port}"
            serve = serve_args("services.orders_state", {"protocol": protocol})
            stack.start(serve, 0, f"{bases[name]}/ping")

        rates = {}
        held = False
        for name, base in bases.items():
            requests, calls, elapsed = flood(base, emulator, orderid, args.seconds)
            rates[name] = calls / elapsed
            print(
                f"{name:18s} {requests / elapsed:7.0f} part requests/s  "
                f"{rates[name]:7.2f} calls/s of one part upstream from one order  "
                f"(legacy {LEGACY_CALLS_PER_S[0]}–{LEGACY_CALLS_PER_S[1]})"
            )
            if name == "defaults":
                bound = 1 + elapsed / MIN_TTL_S
                held = calls <= bound
                print(
                    f"bound: {calls} calls in {elapsed:.1f} s, at most {bound:.0f}: "
                    + ("held" if held else "BROKEN")
                )
        ratio = rates["neither"] / max(rates["defaults"], 1e-9)
        print(f"neither / defaults, upstream calls: {ratio:.0f}")
        sys.exit(0 if held else 1)


if __name__ == "__main__":
    main()

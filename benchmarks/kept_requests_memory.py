"""Benchmark: the memory of the digest request's store (services/orders_state/kept_requests.py;
docs/protocol.md: The digest request) per kept body, for polls of 1 and 3 taxi orders as the
reference clients send them (tags of the five tagged parts, echo fields, three services and
their policy versions), measured by tracemalloc over 5000 users' bodies, decoded and parsed as
the handler does. Prints the body's bytes and an entry's.

    python benchmarks/kept_requests_memory.py
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec

from services.bff.wire import StateRequest
from services.orders_state.kept_requests import KeptRequests, parsed_request
from shared.protocol.limits import Limits
from shared.protocol.request_digest import request_digest

USERS = 5000
PARTS = ("fast_info", "rarely_changed", "static", "chat", "slow")
# a tag as the server issues them (its length is what counts)
TAG = "djEuYWJjZGVmMDEyMzQ1Njc4OS4xOGY2ZjZmNmY2Zi5kZjUwOQ"
_state_request = msgspec.json.Decoder(StateRequest)


def poll_body(user: int, orders: int) -> bytes:
    known_orders = [
        {
            "orderid": f"{user:08d}{k:024d}",
            "service": "taxi",
            "status": "driving",
            "version": 7,
            "tags": dict.fromkeys(PARTS, TAG),
            "created_at": "2026-11-28T19:00:00+00:00",
            "short_text": "Toyota Camry, white",
            "force": False,
        }
        for k in range(orders)
    ]
    body = {
        "known_orders": known_orders,
        "supported_services": ["taxi", "eats", "grocery"],
        "wait_ms": 25000,
        "answer_tag": "AbCdEfGhIjK",
        "policy_versions": {"taxi": "df5e4091ab", "eats": "1234567890", "grocery": "abcdef0123"},
    }
    return json.dumps(body).encode()


def main() -> None:
    for orders in (1, 3):
        store = KeptRequests(per_user=4, max_entries=10 * USERS, max_bytes=2**40)
        bodies = [poll_body(user, orders) for user in range(USERS)]
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for user, raw in enumerate(bodies):
            kept = parsed_request(Limits(), _state_request.decode(raw), len(raw))
            store.keep(f"user{user}", request_digest(raw), kept)
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(
            f"{orders} known order(s): body {len(bodies[0])} B, "
            f"kept entry {(after - before) / USERS:.0f} B"
        )


if __name__ == "__main__":
    main()

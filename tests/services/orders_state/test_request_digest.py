"""The digest request (docs/protocol.md: The digest request) on a real stack: a body sent in
full is kept for its user, and `{"request_digest": d}` is then answered exactly as that body
would be (a 204 when nothing is new, a waiting poll held as well); a digest the process does
not keep for the user (another user's, never sent, dropped by the bounds) is the JSON error
`unknown_request_digest` and changes nothing."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import redis
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from services.orders_state.keys import KEPT_REQUESTS
from shared.protocol.request_digest import request_digest
from shared.web import METRICS
from tests.emulator_api import change
from tests.helpers import STATE, MakeApp, caught_up, held


def body_of(orderid: str, tags: dict[str, str], **extra: Any) -> bytes:
    """A poll's body of one known taxi order, as a client encodes it."""
    known = {"orderid": orderid, "service": "taxi", "status": "driving", "tags": tags}
    return json.dumps({"known_orders": [known], "supported_services": ["taxi"], **extra}).encode()


async def send(
    client: TestClient, user: str, body: bytes, headers: dict[str, str] | None = None
) -> ClientResponse:
    resp = await client.post(
        STATE,
        data=body,
        headers={"X-Yandex-UID": user, "Content-Type": "application/json", **(headers or {})},
    )
    await resp.read()
    return resp


def cached_looks(client: TestClient) -> float:
    """The re-polls held from their client's last look (the watch cache), as /metrics says."""
    registry = client.app[METRICS].registry
    return registry.get_sample_value("mlutp_waiting_cached_looks_total") or 0.0


def digest_of(body: bytes) -> bytes:
    return json.dumps({"request_digest": request_digest(body)}).encode()


async def test_a_digest_is_answered_as_the_full_body_it_stands_for(
    orders_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    first = body_of(orderid, tags)
    full = await send(orders_state, unique, first)
    assert full.status == 200
    answer = await full.json()
    # the same body again, as its digest alone: the same answer
    again = await send(orders_state, unique, digest_of(first))
    assert again.status == 200, await again.text()
    assert await again.json() == answer
    # the client sends back the answer_tag: nothing new is a 204, in full and by digest
    tagged = body_of(orderid, tags, answer_tag=answer["answer_tag"])
    assert (await send(orders_state, unique, tagged)).status == 204
    repeated = await send(orders_state, unique, digest_of(tagged))
    assert repeated.status == 204
    assert repeated.headers["X-Yataxi-Polling-Interval-Ms"]


async def test_the_digest_of_a_gzipped_body_is_of_its_json(
    orders_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    body = body_of(orderid, tags)
    sent = await send(orders_state, unique, gzip.compress(body), {"Content-Encoding": "gzip"})
    assert sent.status == 200
    assert (await send(orders_state, unique, digest_of(body))).status == 200


async def test_a_digest_holds_a_waiting_poll_as_its_body_would(
    waiting_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    first = await send(waiting_state, unique, body_of(orderid, tags, wait_ms=300))
    assert first.headers["X-Mlutp-Wait"] == "timeout"
    answer_tag = (await first.json())["answer_tag"]
    tagged = body_of(orderid, tags, wait_ms=300, answer_tag=answer_tag)
    full = await send(waiting_state, unique, tagged)
    assert (full.status, full.headers["X-Mlutp-Wait"]) == (204, "timeout")
    # by digest: held from the client's last look (the watch cache's key kept with the body)
    before = cached_looks(waiting_state)
    repeated = await send(waiting_state, unique, digest_of(tagged))
    assert (repeated.status, repeated.headers["X-Mlutp-Wait"]) == (204, "timeout")
    assert cached_looks(waiting_state) == before + 1
    # a long wait by digest is held until a write wakes it, and then answered in full
    long_wait = body_of(orderid, tags, wait_ms=20_000, answer_tag=answer_tag)
    assert (await send(waiting_state, unique, long_wait)).status in (200, 204)
    waiting = asyncio.create_task(send(waiting_state, unique, digest_of(long_wait)))
    await held(waiting_state, waiting)
    await change(emulator, "taxi", orderid, {"comment": "by the gate"})
    woken = await waiting
    assert (woken.status, woken.headers["X-Mlutp-Wait"]) == (200, "wakeup")
    [order] = (await woken.json())["orders"]
    assert "rarely_changed" in order["need_request"]


async def test_a_digest_is_never_resolved_for_another_user(
    orders_state: TestClient, emulator: TestClient, redis_sync: redis.Redis, unique: str
):
    orderid, tags = await caught_up(emulator, redis_sync, unique)
    body = body_of(orderid, tags)
    assert (await send(orders_state, unique, body)).status == 200
    other = await send(orders_state, f"{unique}-other", digest_of(body))
    assert other.status == 400
    assert (await other.json())["code"] == "unknown_request_digest"


async def test_an_unknown_digest_is_a_json_error_that_stores_nothing(orders_state: TestClient):
    kept = orders_state.app[KEPT_REQUESTS]
    before = len(kept)
    resp = await send(orders_state, "nobody", digest_of(b'{"known_orders": []}'))
    assert resp.status == 400
    error = await resp.json()
    assert error["code"] == "unknown_request_digest"
    assert "full body" in error["message"]
    assert len(kept) == before


async def test_a_digest_goes_alone_and_well_formed(orders_state: TestClient, unique: str):
    body = b'{"known_orders": []}'
    assert (await send(orders_state, unique, body)).status == 200
    digest = request_digest(body)
    beside = json.dumps({"request_digest": digest, "wait_ms": 0}).encode()
    resp = await send(orders_state, unique, beside)
    assert (resp.status, (await resp.json())["code"]) == (400, "invalid_request")
    short = await send(orders_state, unique, json.dumps({"request_digest": digest[:-1]}).encode())
    assert short.status == 400
    assert (await send(orders_state, unique, digest_of(body))).status == 200


async def test_past_the_per_user_bound_the_oldest_body_is_dropped(
    make_orders_state: MakeApp, unique: str
):
    client = await make_orders_state(request_digests={"per_user": 2})
    bodies = [json.dumps({"known_orders": [], "wait_ms": n}).encode() for n in range(3)]
    for body in bodies:
        assert (await send(client, unique, body)).status == 200
    oldest = await send(client, unique, digest_of(bodies[0]))
    assert (oldest.status, (await oldest.json())["code"]) == (400, "unknown_request_digest")
    for body in bodies[1:]:
        assert (await send(client, unique, digest_of(body))).status == 200
    # and past the total bound, the least recently used of any user
    small = await make_orders_state(request_digests={"max_entries": 1})
    assert (await send(small, unique, bodies[0])).status == 200
    assert (await send(small, f"{unique}-2", bodies[1])).status == 200
    assert (await send(small, unique, digest_of(bodies[0]))).status == 400
    assert (await send(small, f"{unique}-2", digest_of(bodies[1]))).status == 200

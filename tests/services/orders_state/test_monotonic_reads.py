"""Monotonic reads on real processes (docs/protocol.md: Orders and their order): every actual
order carries its source's `version`, the client echoes it, and no answer gives the order
actual at an older one. A kept answer older than the echo is not used (the source is asked);
a source whose own answer is still older lags (the order is stale, with the client's echo),
and a client echoing versions it never got has its source asked at most once per min_ttl."""

from __future__ import annotations

import time
from typing import Any

from aiohttp.test_utils import TestClient

from services.bff.resources import ENGINE
from tests.emulator_api import change, create_order_id, source_calls
from tests.helpers import poll

TAXI = ["taxi"]
MIN_TTL_S = 2.0  # the default min_ttl: the bound on the source calls echoes may cause


def echoing(order: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The known order of a client that holds this answered order (its created_at and
    version echoed, as the reference clients do), with `fields` over it."""
    kept = ("orderid", "service", "status", "tags", "created_at", "version")
    return {**{k: order[k] for k in kept if k in order}, **fields}


async def one_order(client: TestClient, user: str, known: dict[str, Any]) -> dict[str, Any]:
    status, answer, _ = await poll(client, user, {"known_orders": [known]})
    assert status == 200, answer
    [order] = answer["orders"]
    return order


async def kept_at_first_poll(
    orders_state: TestClient, emulator: TestClient, user: str
) -> dict[str, Any]:
    """A driving taxi order, polled once: its source's answer kept; the order as answered."""
    await create_order_id(emulator, user, "taxi", status="driving")
    status, answer, _ = await poll(orders_state, user, {"supported_services": TAXI})
    assert status == 200
    await orders_state.server.app[ENGINE].listings.drain()
    [order] = answer["orders"]
    assert order["update_status"] == "actual"
    assert isinstance(order["version"], int)
    return order


async def test_every_actual_order_carries_its_source_s_version(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    first = await kept_at_first_poll(orders_state, emulator, unique)
    changed = await change(emulator, "taxi", first["orderid"], {"comment": "at the gate"})
    assert changed["version"] == first["version"] + 1


async def test_a_kept_answer_older_than_the_echo_is_not_used_the_source_is_asked(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    first = await kept_at_first_poll(orders_state, emulator, unique)
    # a change the list does not show (no list bump): the kept answer still stands, at N
    await change(emulator, "taxi", first["orderid"], {"comment": "at the gate"})
    newer = first["version"] + 1
    calls = await source_calls(emulator, unique)
    same = await one_order(orders_state, unique, echoing(first))
    assert (same["update_status"], same["version"]) == ("actual", first["version"])
    assert await source_calls(emulator, unique) == calls  # answered from the kept answer
    # the client got N+1 elsewhere (another replica's fresh answer): the kept N is older
    order = await one_order(orders_state, unique, echoing(first, version=newer))
    assert (order["update_status"], order["version"]) == ("actual", newer)
    assert await source_calls(emulator, unique) == calls + 1
    # the fresh answer was current: it is kept, and the next poll asks nobody
    await orders_state.server.app[ENGINE].listings.drain()
    again = await one_order(orders_state, unique, echoing(order))
    assert (again["update_status"], again["version"]) == ("actual", newer)
    assert await source_calls(emulator, unique) == calls + 1


async def test_a_version_the_source_has_not_reached_is_stale_and_asks_once_per_min_ttl(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    first = await kept_at_first_poll(orders_state, emulator, unique)
    ahead = first["version"] + 5  # never given: the source's own answer is older
    known = echoing(first, version=ahead, status="echo me")
    calls = await source_calls(emulator, unique)
    started = time.monotonic()
    polls = 10
    for _ in range(polls):
        order = await one_order(orders_state, unique, known)
        # never actual at an older version: stale, the client's own echo
        assert order["update_status"] == "stale"
        assert (order["status"], order["version"]) == ("echo me", ahead)
        assert order["need_request"] == []
    elapsed = time.monotonic() - started
    asked = await source_calls(emulator, unique) - calls
    assert 1 <= asked <= 1 + int(elapsed / MIN_TTL_S)
    assert asked < polls


async def test_a_malformed_echoed_version_is_ignored_not_a_400(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    first = await kept_at_first_poll(orders_state, emulator, unique)
    calls = await source_calls(emulator, unique)
    for malformed in ("7", -1, 2**60, 1.5, True, None, {"v": 1}):
        order = await one_order(orders_state, unique, echoing(first, version=malformed))
        assert (order["update_status"], order["version"]) == ("actual", first["version"])
    assert await source_calls(emulator, unique) == calls

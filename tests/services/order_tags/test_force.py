"""The force budget in order_tags, against a real Redis (docs/protocol.md: Tags and need_request):
honoured a bounded number of times per order and user in a minute, counted only on an order
whose tags name the forcing user its owner; a force on an order that does not exist, or is
another user's, is not honoured and writes nothing."""

from __future__ import annotations

from typing import Any

import redis
from aiohttp.test_utils import TestClient

from shared.redis import force_key, tags_key
from tests.services.order_tags.conftest import AUTH


async def own(client: TestClient, orderid: str, user: str, service: str = "taxi") -> None:
    """The order's tags as a poll makes them for an order its source lists: naming its owner."""
    order = {"service": service, "orderid": orderid, "parts": ["fast_info"], "user_id": user}
    resp = await client.post("/v1/tags/create", json={"orders": [order]}, headers=AUTH)
    assert resp.status == 200


async def forced(
    client: TestClient, forces: list[dict[str, Any]], per_minute: int = 2
) -> list[bool]:
    """A poll's read naming these orders with force: which were honoured."""
    orders = [{"service": f["service"], "orderid": f["orderid"]} for f in forces]
    resp = await client.post(
        "/v1/tags/get",
        json={"orders": orders, "force": forces, "force_per_minute": per_minute},
        headers=AUTH,
    )
    assert resp.status == 200, await resp.text()
    return [bool(honoured) for honoured in (await resp.json())["forced"]]


def keys_of(redis_sync: redis.Redis, unique: str) -> list[str]:
    return sorted(redis_sync.scan_iter(match=f"*{unique}*", count=1000))


async def test_an_owners_force_is_honoured_up_to_its_budget_in_a_minute_and_not_beyond(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    user = f"{unique}-user"
    one, other = f"{unique}-1", f"{unique}-2"
    await own(tags_client, one, user)
    await own(tags_client, other, user)
    force_one = {"service": "taxi", "orderid": one, "user_id": user}
    assert [await forced(tags_client, [force_one], 3) for _ in range(5)] == [[True]] * 3 + [
        [False]
    ] * 2
    # each order has a budget of its own, and a zero budget honours nothing
    assert await forced(tags_client, [{**force_one, "orderid": other}], 3) == [True]
    assert await forced(tags_client, [{**force_one, "orderid": other}], 0) == [False]
    # a read that does not force spends nothing and says nothing of force
    resp = await tags_client.post(
        "/v1/tags/get", json={"orders": [{"service": "taxi", "orderid": other}]}, headers=AUTH
    )
    assert "force_honoured" not in (await resp.json())["orders"][0]
    # the window is a minute from the first force counted, on the order's shard
    key = force_key("taxi", one, user)
    assert 0 < redis_sync.ttl(key) <= 60
    redis_sync.delete(key)  # the minute is over
    assert await forced(tags_client, [force_one], 3) == [True]


async def test_a_force_on_orders_that_do_not_exist_writes_nothing(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    made_up = [
        {"service": "taxi", "orderid": f"{unique}-{i}", "user_id": f"{unique}-user"}
        for i in range(20)
    ]
    before = redis_sync.dbsize()
    for _ in range(30):
        assert await forced(tags_client, made_up, per_minute=6) == [False] * 20
    # nothing at all: no force count, no tags (the session's Redis is this process's alone
    # while a test runs, but only these ids are checked: other tests' keys may expire)
    assert keys_of(redis_sync, unique) == []
    assert redis_sync.dbsize() <= before


async def test_a_force_on_another_users_order_spends_nothing_of_its_owners_budget(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    owner, intruder = f"{unique}-owner", f"{unique}-intruder"
    orderid = f"{unique}-order"
    await own(tags_client, orderid, owner)
    stored = keys_of(redis_sync, unique)
    by_intruder = {"service": "taxi", "orderid": orderid, "user_id": intruder}
    # the intruder's forces are never honoured, and count nowhere
    assert [await forced(tags_client, [by_intruder]) for _ in range(10)] == [[False]] * 10
    assert keys_of(redis_sync, unique) == stored
    # a force with no user to check it against is not honoured either
    assert await forced(tags_client, [{"service": "taxi", "orderid": orderid}]) == [False]
    assert keys_of(redis_sync, unique) == stored
    # the owner's budget is whole: 2 a minute
    by_owner = {**by_intruder, "user_id": owner}
    assert [await forced(tags_client, [by_owner]) for _ in range(3)] == [[True], [True], [False]]
    assert keys_of(redis_sync, unique) == sorted([*stored, force_key("taxi", orderid, owner)])


async def test_an_order_with_no_owner_named_honours_no_force_until_a_create_names_it(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    # tags a feature wrote, naming no owner: whose order it is cannot be checked
    orderid = f"{unique}-feature"
    resp = await tags_client.post(
        "/v1/tags/set",
        json={"service": "taxi", "orderid": orderid, "tags": {"chat": "c1"}},
        headers=AUTH,
    )
    assert resp.status == 200
    force = {"service": "taxi", "orderid": orderid, "user_id": f"{unique}-user"}
    assert await forced(tags_client, [force]) == [False]
    assert redis_sync.exists(force_key("taxi", orderid, f"{unique}-user")) == 0

    # a poll whose source lists it for the user creates its missing parts, here none, and
    # names the owner: from then on the owner's force counts
    async def create_chat(user: str) -> None:
        order = {"service": "taxi", "orderid": orderid, "parts": ["chat"], "user_id": user}
        resp = await tags_client.post("/v1/tags/create", json={"orders": [order]}, headers=AUTH)
        assert resp.status == 200
        assert (await resp.json())["orders"][0]["tags"] == {"chat": "c1"}

    await create_chat(f"{unique}-user")
    assert redis_sync.hget(tags_key("taxi", orderid), "_owner") == f"{unique}-user"
    await create_chat(f"{unique}-later")  # the first owner named stays
    assert redis_sync.hget(tags_key("taxi", orderid), "_owner") == f"{unique}-user"
    assert await forced(tags_client, [force]) == [True]

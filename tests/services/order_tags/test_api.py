"""order_tags endpoints against a real Redis (docs/protocol.md: Writing tags (order_tags))."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from aiohttp.test_utils import TestClient

from shared.redis import kept_answer_key, tags_key
from tests.helpers import stored_parts
from tests.services.order_tags.conftest import AUTH

# raw bytes (data=) go as application/octet-stream unless said otherwise: a 415
AUTH_JSON = {**AUTH, "Content-Type": "application/json"}


async def post(client: TestClient, path: str, body: object, headers: dict[str, str] = AUTH):
    return await client.post(path, json=body, headers=headers)


async def test_set_then_get_returns_the_parts_in_one_batch(tags_client: TestClient, unique: str):
    o1, o2 = f"{unique}-1", f"{unique}-2"
    resp = await post(
        tags_client,
        "/v1/tags/set",
        {"service": "taxi", "orderid": o1, "tags": {"fast_info": "v1", "chat": "c1"}},
    )
    assert resp.status == 200
    assert (await resp.json())["tags"] == {"fast_info": "v1", "chat": "c1"}

    written_by = time.time() * 1000
    resp = await post(
        tags_client,
        "/v1/tags/get",
        {"orders": [{"service": "taxi", "orderid": o1}, {"service": "eats", "orderid": o2}]},
    )
    assert resp.status == 200
    answer = await resp.json()
    # when the order's first tag was written: for the grace of a just-created order
    created_ms = answer["orders"][0].pop("created_ms")
    assert written_by - 5_000 <= created_ms <= written_by
    assert answer == {
        "orders": [
            {"service": "taxi", "orderid": o1, "tags": {"fast_info": "v1", "chat": "c1"}},
            {"service": "eats", "orderid": o2, "tags": None},
        ]
    }


async def test_key_is_a_cluster_hash_tag_over_service_and_order(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    await post(
        tags_client,
        "/v1/tags/set",
        {"service": "taxi", "orderid": unique, "tags": {"fast_info": "v1"}},
    )
    assert stored_parts(redis_sync, tags_key("taxi", unique)) == {"fast_info": "v1"}


async def test_set_updates_just_the_given_parts(tags_client: TestClient, unique: str):
    await post(
        tags_client,
        "/v1/tags/set",
        {"service": "taxi", "orderid": unique, "tags": {"fast_info": "v1", "chat": "c1"}},
    )
    resp = await post(
        tags_client, "/v1/tags/set", {"service": "taxi", "orderid": unique, "tags": {"chat": "c2"}}
    )
    assert (await resp.json())["tags"] == {"fast_info": "v1", "chat": "c2"}


async def test_only_if_absent_does_not_overwrite(tags_client: TestClient, unique: str):
    await post(
        tags_client,
        "/v1/tags/set",
        {"service": "taxi", "orderid": unique, "tags": {"fast_info": "v1"}},
    )
    resp = await post(
        tags_client,
        "/v1/tags/set",
        {
            "service": "taxi",
            "orderid": unique,
            "only_if_absent": True,
            "tags": {"fast_info": "other", "chat": "c1"},
        },
    )
    assert resp.status == 200
    assert (await resp.json())["tags"] == {"fast_info": "v1", "chat": "c1"}


async def test_bump_yields_new_unique_values(tags_client: TestClient, unique: str):
    seen: set[str] = set()
    for _ in range(20):
        resp = await post(
            tags_client,
            "/v1/tags/bump",
            {"service": "taxi", "orderid": unique, "parts": ["fast_info", "chat"]},
        )
        assert resp.status == 200
        new_tags = (await resp.json())["tags"]
        assert set(new_tags) == {"fast_info", "chat"}
        seen.update(new_tags.values())
    assert len(seen) == 40
    resp = await post(
        tags_client, "/v1/tags/get", {"orders": [{"service": "taxi", "orderid": unique}]}
    )
    assert (await resp.json())["orders"][0]["tags"] == new_tags


async def test_set_and_bump_set_the_key_ttl(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    key = tags_key("taxi", unique)
    await post(
        tags_client,
        "/v1/tags/set",
        {"service": "taxi", "orderid": unique, "tags": {"fast_info": "v1"}},
    )
    assert 0 < redis_sync.ttl(key) <= 24 * 3600
    redis_sync.expire(key, 5)
    await post(
        tags_client, "/v1/tags/bump", {"service": "taxi", "orderid": unique, "parts": ["chat"]}
    )
    assert redis_sync.ttl(key) > 5


async def test_delete_removes_the_order(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    await post(
        tags_client,
        "/v1/tags/set",
        {"service": "taxi", "orderid": unique, "tags": {"fast_info": "v1"}},
    )
    resp = await post(tags_client, "/v1/tags/delete", {"service": "taxi", "orderid": unique})
    assert await resp.json() == {"deleted": True}
    assert not redis_sync.exists(tags_key("taxi", unique))
    resp = await post(tags_client, "/v1/tags/delete", {"service": "taxi", "orderid": unique})
    assert await resp.json() == {"deleted": False}


async def test_concurrent_sets_of_different_parts_lose_nothing(
    tags_client: TestClient, unique: str
):
    parts = {f"part_{i}": f"content-{i}" for i in range(30)}
    responses = await asyncio.gather(
        *(
            post(
                tags_client,
                "/v1/tags/set",
                {"service": "taxi", "orderid": unique, "tags": {part: content}},
            )
            for part, content in parts.items()
        )
    )
    assert all(r.status == 200 for r in responses)
    resp = await post(
        tags_client, "/v1/tags/get", {"orders": [{"service": "taxi", "orderid": unique}]}
    )
    assert (await resp.json())["orders"][0]["tags"] == parts


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "test-token"}]
)
@pytest.mark.parametrize(
    "path",
    [
        "/v1/tags/get",
        "/v1/tags/set",
        "/v1/tags/create",
        "/v1/tags/bump",
        "/v1/tags/delete",
        "/v1/lists/bump",
        "/v1/lists/keep",
        "/v1/lists/keep_many",
    ],
)
async def test_a_call_without_the_right_token_is_401_with_a_challenge_and_writes_nothing(
    tags_client: TestClient,
    unique: str,
    redis_sync: redis.Redis,
    headers: dict[str, str],
    path: str,
):
    body = {
        "service": "taxi",
        "orderid": unique,
        "tags": {"fast_info": "x"},
        "parts": ["chat"],
        "orders": [{"service": "taxi", "orderid": unique}],
    }
    redis_sync.hset(tags_key("taxi", unique), "fast_info", "kept")
    resp = await tags_client.post(path, json=body, headers=headers)
    assert resp.status == 401
    assert (await resp.json())["code"] == "unauthorized"
    # RFC 9110 §11.6.1 and RFC 6750 §3: a 401 names its scheme; a token given is refused
    challenge = 'Bearer realm="order_tags"' + (', error="invalid_token"' if headers else "")
    assert resp.headers.getall("WWW-Authenticate") == [challenge]
    assert stored_parts(redis_sync, tags_key("taxi", unique)) == {"fast_info": "kept"}


BAD_BODIES = [
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "x", "tags": {"a": "b"'),  # truncated
    ("/v1/tags/set", b"not json"),
    ("/v1/tags/set", b""),
    ("/v1/tags/set", b"[]"),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "x", "tags": {"fast_info": 5}}'),
    ("/v1/tags/set", b'{"service": "Taxi!", "orderid": "x", "tags": {"fast_info": "v"}}'),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "", "tags": {"fast_info": "v"}}'),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "' + b"x" * 129 + b'", "tags": {"a": "v"}}'),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "x", "tags": {"a": "' + b"v" * 65 + b'"}}'),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "x", "tags": {"a": "not url safe"}}'),
    (
        "/v1/tags/set",
        '{"service": "taxi", "orderid": "x", "tags": {"a": "\u00e9t\u00e9"}}'.encode(),
    ),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "x", "tags": {}}'),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "x"}'),
    ("/v1/tags/set", b'{"service": "taxi", "orderid": "x", "tags": {"a": "v"}, "extra": 1}'),
    (
        "/v1/tags/set",
        b'{"service": "taxi", "orderid": "x", "tags": {"a": "v"}, "only_if_absent": "yes"}',
    ),
    (
        "/v1/tags/set",
        b'{"service": "taxi", "orderid": "x", "tags": {'
        + b",".join(b'"p%d": "v"' % i for i in range(33))
        + b"}}",
    ),
    ("/v1/tags/get", b'{"orders": [], "lists": [{"service": "taxi", "user_id": "a b"}]}'),
    ("/v1/lists/bump", b'{"service": "taxi", "user_id": ""}'),
    ("/v1/lists/keep", b'{"service": "taxi", "user_id": "u", "tag": "t", "answer": []}'),
    ("/v1/tags/get", b'{"orders": [{"service": "taxi"}]}'),
    ("/v1/tags/bump", b'{"service": "taxi", "orderid": "x", "parts": []}'),
    ("/v1/tags/bump", b'{"service": "taxi", "orderid": "x", "parts": ["Bad Part"]}'),
    ("/v1/tags/delete", b'{"service": "taxi"}'),
]


@pytest.mark.parametrize(("path", "body"), BAD_BODIES)
async def test_bad_input_is_400_with_a_json_error_and_changes_nothing(
    tags_client: TestClient, redis_sync: redis.Redis, path: str, body: bytes
):
    before = {key: redis_sync.hgetall(key) for key in redis_sync.scan_iter("tags:*")}
    resp = await tags_client.post(path, data=body, headers=AUTH_JSON)
    assert resp.status == 400
    error = await resp.json()
    assert set(error) == {"code", "message"} and error["message"]
    assert {key: redis_sync.hgetall(key) for key in redis_sync.scan_iter("tags:*")} == before


async def test_a_body_over_the_limit_is_413_and_changes_nothing(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    body = (
        b'{"service": "taxi", "orderid": "' + unique.encode() + b'", "tags": {"a": "v"}, "pad": "'
    )
    body += b"x" * (64 * 1024) + b'"}'
    resp = await tags_client.post("/v1/tags/set", data=body, headers=AUTH_JSON)
    assert resp.status == 413
    assert (await resp.json())["code"] == "payload_too_large"
    assert not redis_sync.exists(tags_key("taxi", unique))


async def test_unknown_route_and_method_get_json_errors(tags_client: TestClient):
    resp = await tags_client.get("/v1/nope", headers=AUTH)
    assert resp.status == 404 and (await resp.json())["code"] == "not_found"
    resp = await tags_client.get("/v1/tags/get", headers=AUTH)
    assert resp.status == 405 and (await resp.json())["code"] == "method_not_allowed"


async def test_ping_and_metrics(tags_client: TestClient):
    resp = await tags_client.get("/ping")
    assert resp.status == 200
    await post(tags_client, "/v1/tags/get", {"orders": [{"service": "taxi", "orderid": "m"}]})
    text = await (await tags_client.get("/metrics")).text()
    assert 'http_requests_total{method="POST",route="/v1/tags/get",status="200"}' in text
    assert "http_request_duration_seconds_bucket" in text


async def test_request_id_is_echoed_or_generated(tags_client: TestClient):
    resp = await tags_client.get("/ping", headers={"X-Request-Id": "abc"})
    assert resp.headers["X-Request-Id"] == "abc"
    resp = await tags_client.get("/ping")
    assert len(resp.headers["X-Request-Id"]) == 32


async def test_create_makes_missing_tags_for_many_orders_in_one_call_and_keeps_existing_ones(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    o1, o2 = f"{unique}-1", f"{unique}-2"
    await post(
        tags_client, "/v1/tags/set", {"service": "taxi", "orderid": o1, "tags": {"chat": "c1"}}
    )
    redis_sync.expire(tags_key("taxi", o1), 5)
    resp = await post(
        tags_client,
        "/v1/tags/create",
        {
            "orders": [
                {"service": "taxi", "orderid": o1, "parts": ["fast_info", "chat"]},
                {"service": "eats", "orderid": o2, "parts": ["full_info"]},
            ]
        },
    )
    assert resp.status == 200
    orders = (await resp.json())["orders"]
    assert [(o["service"], o["orderid"]) for o in orders] == [("taxi", o1), ("eats", o2)]
    first, second = orders[0]["tags"], orders[1]["tags"]
    # the feature's tag stays; the missing one is new and unique
    assert first["chat"] == "c1" and first["fast_info"] not in ("", "c1")
    assert set(second) == {"full_info"}
    assert stored_parts(redis_sync, tags_key("taxi", o1)) == first
    assert stored_parts(redis_sync, tags_key("eats", o2)) == second
    # the write refreshes the TTL
    assert redis_sync.ttl(tags_key("taxi", o1)) > 5


async def test_an_order_has_at_most_32_parts_and_a_write_past_that_is_400_writing_nothing(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    key = tags_key("taxi", unique)
    first = {f"part_{i}": f"v{i}" for i in range(30)}
    resp = await post(
        tags_client, "/v1/tags/set", {"service": "taxi", "orderid": unique, "tags": first}
    )
    assert resp.status == 200
    stored_before = redis_sync.hgetall(key)
    ttl_before = redis_sync.ttl(key)

    # parts already there count once; three new ones would make 33
    past = {"part_0": "changed", "extra_a": "a", "extra_b": "b", "extra_c": "c"}
    for path, body in [
        ("/v1/tags/set", {"service": "taxi", "orderid": unique, "tags": past}),
        ("/v1/tags/bump", {"service": "taxi", "orderid": unique, "parts": list(past)}),
        ("/v1/tags/create", {"orders": [{"service": "taxi", "orderid": unique, "parts": [*past]}]}),
    ]:
        resp = await post(tags_client, path, body)
        assert resp.status == 400, path
        error = await resp.json()
        assert error["code"] == "too_many_parts", path
        assert "at most 32 parts" in error["message"]
        assert redis_sync.hgetall(key) == stored_before, path
    assert redis_sync.ttl(key) <= ttl_before

    # up to 32 is fine, and so is a write of parts the order already has
    resp = await post(
        tags_client,
        "/v1/tags/set",
        {"service": "taxi", "orderid": unique, "tags": {"extra_a": "a", "extra_b": "b"}},
    )
    assert resp.status == 200 and len((await resp.json())["tags"]) == 32
    resp = await post(
        tags_client, "/v1/tags/bump", {"service": "taxi", "orderid": unique, "parts": ["part_1"]}
    )
    assert resp.status == 200


async def test_a_kept_answer_another_version_wrote_reads_as_none(
    tags_client: TestClient, unique: str, redis_sync: redis.Redis
):
    redis_sync.set(kept_answer_key("taxi", unique), b'{"written": "by another version"}')
    lists = [{"service": "taxi", "user_id": unique}]
    resp = await post(tags_client, "/v1/tags/get", {"orders": [], "lists": lists})
    assert resp.status == 200
    (listed,) = (await resp.json())["lists"]
    assert listed.get("kept") is None and listed["tag"]


SUPERAPP = ("taxi", "eats", "grocery")


async def read_lists(client: TestClient, user: str) -> dict[str, dict[str, object]]:
    resp = await post(
        client,
        "/v1/tags/get",
        {"orders": [], "lists": [{"service": s, "user_id": user} for s in SUPERAPP]},
    )
    assert resp.status == 200, await resp.text()
    return {entry["service"]: entry for entry in (await resp.json())["lists"]}


async def test_answers_kept_in_one_call_are_each_read_under_their_list(
    tags_client: TestClient, unique: str
):
    tags = {
        service: entry["tag"] for service, entry in (await read_lists(tags_client, unique)).items()
    }
    answers = [
        {"service": s, "user_id": unique, "tag": tags[s], "answer": {"orders": [{"orderid": s}]}}
        for s in SUPERAPP
    ]
    resp = await post(tags_client, "/v1/lists/keep_many", {"answers": answers})
    assert resp.status == 200 and await resp.json() == {"kept": 3}
    lists = await read_lists(tags_client, unique)
    for service in SUPERAPP:
        kept = lists[service]["kept"]
        assert isinstance(kept, dict)
        assert kept["tag"] == tags[service]
        assert kept["answer"] == {"orders": [{"orderid": service}]}


@pytest.mark.parametrize(
    "bad",
    [
        {"answer": {"a": [[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]}},
        {"answer": {"pad": "x" * (33 * 1024)}},
        {"tag": "has spaces"},
    ],
)
async def test_a_keep_call_with_one_bad_answer_is_a_400_and_keeps_none(
    tags_client: TestClient, unique: str, bad: dict[str, object]
):
    good = {"service": "taxi", "user_id": unique, "tag": "t1", "answer": {"orders": []}}
    resp = await post(
        tags_client,
        "/v1/lists/keep_many",
        {"answers": [good, {**good, "service": "eats", **bad}]},
    )
    assert resp.status == 400
    assert set(await resp.json()) == {"code", "message"}
    assert all(
        entry.get("kept") is None for entry in (await read_lists(tags_client, unique)).values()
    )

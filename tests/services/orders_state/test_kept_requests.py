"""The digest request's store (services/orders_state/kept_requests.py): its bounds, per user
and in all, the least recently used dropped first (docs/protocol.md: The digest request)."""

from __future__ import annotations

import pytest

from services.orders_state.kept_requests import KeptRequest, KeptRequests
from shared.errors import UnknownRequestDigest


def body(size: int = 100) -> KeptRequest:
    return KeptRequest([], ["taxi"], {}, 0, None, {}, size)


def held(store: KeptRequests, user: str, digest: str) -> bool:
    try:
        store.resolve(user, digest)
    except UnknownRequestDigest:
        return False
    return True


def test_a_body_is_kept_for_its_user_alone():
    store = KeptRequests(per_user=4, max_entries=10, max_bytes=10_000)
    kept = body()
    store.keep("u1", "d", kept)
    assert store.resolve("u1", "d") is kept
    assert not held(store, "u2", "d")


def test_past_the_per_user_cap_the_users_least_recently_used_body_goes():
    store = KeptRequests(per_user=2, max_entries=10, max_bytes=10_000)
    store.keep("u1", "a", body())
    store.keep("u1", "b", body())
    store.keep("u2", "a", body())
    store.resolve("u1", "a")  # used: b is now the user's oldest
    store.keep("u1", "c", body())
    assert [held(store, "u1", d) for d in "abc"] == [True, False, True]
    assert held(store, "u2", "a")


def test_past_the_total_caps_the_least_recently_used_body_of_anyone_goes():
    store = KeptRequests(per_user=4, max_entries=2, max_bytes=10_000)
    store.keep("u1", "a", body())
    store.keep("u2", "a", body())
    store.keep("u3", "a", body())
    assert [held(store, u, "a") for u in ("u1", "u2", "u3")] == [False, True, True]
    by_bytes = KeptRequests(per_user=4, max_entries=10, max_bytes=250)
    for user in ("u1", "u2", "u3"):
        by_bytes.keep(user, "a", body(100))
    assert len(by_bytes) == 2 and by_bytes.bytes == 200
    assert not held(by_bytes, "u1", "a")


def test_a_body_larger_than_the_byte_cap_is_not_kept_and_a_repeat_keeps_the_first():
    store = KeptRequests(per_user=4, max_entries=10, max_bytes=250)
    store.keep("u1", "big", body(251))
    assert len(store) == 0
    first = body()
    store.keep("u1", "a", first)
    store.keep("u1", "a", body())
    assert store.resolve("u1", "a") is first and store.bytes == 100


def test_an_unknown_digest_tells_the_client_to_send_the_full_body():
    with pytest.raises(UnknownRequestDigest) as raised:
        KeptRequests(per_user=1, max_entries=1, max_bytes=1).resolve("u1", "d")
    assert raised.value.code == "unknown_request_digest" and raised.value.status == 400
    assert "full body" in raised.value.message

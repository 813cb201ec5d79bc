"""Tags made again after an order's key was lost (expired, a flush) carry the order's version
as its source listed it (docs/protocol.md: A fleet): an upstream is told the version, and a
part the app holds at that version is not fetched again."""

from __future__ import annotations

import redis
from aiohttp.test_utils import TestClient

from services.bff.config import ProtocolSettings
from services.bff.resources import timings
from shared.protocol.tags import refetch_phase
from shared.redis import list_key, tags_key
from tests.emulator_api import change, create_order_id
from tests.helpers import all_tags, client_tag, poll, stored_parts

DEGRADED_TTL_MS = timings(ProtocolSettings()).degraded_min_ttl_ms


async def test_tags_made_again_carry_the_orders_version_and_need_nothing_held_at_it(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    orderid = await create_order_id(emulator, unique, status="driving")
    _, first, _ = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    [order] = first["orders"]
    version = order["version"]
    held = all_tags(redis_sync, orderid, age_ms=60_000)
    # and one part the app holds at a version before the order's
    held["rarely_changed"] = client_tag("taxi", "v0", age_ms=60_000)
    stored = stored_parts(redis_sync, tags_key("taxi", orderid))
    at_version = {part for part, content in stored.items() if content == f"v{version}"}
    assert "fast_info" in at_version  # the order core wrote it at the order's version

    # the store lost the order's tags and the user's list (a flush: the source is asked)
    redis_sync.delete(tags_key("taxi", orderid), list_key("taxi", unique))
    known = {k: order[k] for k in ("orderid", "service", "status", "version")}
    _, again, _ = await poll(orders_state, unique, {"known_orders": [{**known, "tags": held}]})

    remade = stored_parts(redis_sync, tags_key("taxi", orderid))
    assert set(remade.values()) == {f"v{version}"}
    # a create made them, the order having none: a tag the app holds from before is older
    assert int(redis_sync.hget(tags_key("taxi", orderid), "_made")) > 0  # type: ignore[arg-type]
    [answered] = again["orders"]
    # what the app holds at the order's version is unchanged
    assert not at_version & set(answered["need_request"])
    # a part it holds at an older one is due at the order's moment in the degraded TTL after
    # the tags were made again, not at once with every other order's
    if refetch_phase("taxi", orderid) * DEGRADED_TTL_MS > 1000:
        assert "rarely_changed" not in answered["need_request"]


async def test_a_features_write_after_the_tags_were_made_again_is_a_change_not_a_loss(
    orders_state: TestClient, emulator: TestClient, unique: str, redis_sync: redis.Redis
):
    """Once a feature writes a part of an order whose tags were made again, what differs
    from the app's tag is a change: it is needed after the min TTL, not at the order's moment
    of the degraded TTL (the note of the make is gone)."""
    orderid = await create_order_id(emulator, unique, status="driving")
    _, first, _ = await poll(orders_state, unique, {"supported_services": ["taxi"]})
    [order] = first["orders"]
    held = all_tags(redis_sync, orderid, age_ms=60_000)
    redis_sync.delete(tags_key("taxi", orderid), list_key("taxi", unique))
    known = {k: order[k] for k in ("orderid", "service", "status", "version")}
    await poll(orders_state, unique, {"known_orders": [{**known, "tags": held}]})
    assert redis_sync.hexists(tags_key("taxi", orderid), "_made")
    await change(emulator, "taxi", orderid, {"comment": "by the gate"})
    assert not redis_sync.hexists(tags_key("taxi", orderid), "_made")
    _, again, _ = await poll(orders_state, unique, {"known_orders": [{**known, "tags": held}]})
    [answered] = again["orders"]
    assert "rarely_changed" in answered["need_request"]

"""docs/protocol.md: Tags and need_request: a part whose stored tag was made again because the
order's tags were lost is refetched spread over the degraded TTL, not at once; order_tags says
so by noting when a create made an order's tags (`made_ms`). The note is for tags made from
nothing: a part a feature wrote after the loss changed, and must read as changed."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from tests.services.order_tags.conftest import AUTH


async def post(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    resp = await client.post(path, json=body, headers=AUTH)
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def stored(client: TestClient, order: dict[str, str]) -> dict[str, Any]:
    body = await post(client, "/v1/tags/get", {"orders": [order]})
    [tags] = body["orders"]
    return dict(tags)


async def create(client: TestClient, order: dict[str, str], parts: dict[str, str]) -> None:
    await post(client, "/v1/tags/set", {**order, "tags": parts, "only_if_absent": True})


async def test_a_create_that_makes_an_orders_tags_from_nothing_notes_when(
    tags_client: TestClient, unique: str
):
    order = {"service": "taxi", "orderid": unique}
    await create(tags_client, order, {"fast_info": "v3", "chat": "v3"})
    assert (await stored(tags_client, order))["made_ms"] is not None
    # a feature's change takes the note away: what differs now is a change
    await post(tags_client, "/v1/tags/bump", {**order, "parts": ["chat"]})
    assert (await stored(tags_client, order)).get("made_ms") is None


async def test_a_create_after_a_features_write_into_lost_tags_notes_nothing(
    tags_client: TestClient, unique: str
):
    order = {"service": "taxi", "orderid": unique}
    # the order's tags lost (its key gone), then a feature bumps the part it changed: the
    # hash holds that part alone
    await post(tags_client, "/v1/tags/bump", {**order, "parts": ["fast_info"]})
    bumped = (await stored(tags_client, order))["tags"]["fast_info"]
    # the next poll makes the missing parts: the feature's part keeps its content and no note
    # passes it for lost
    await create(tags_client, order, {"fast_info": "v7", "chat": "v7"})
    after = await stored(tags_client, order)
    assert after["tags"] == {"fast_info": bumped, "chat": "v7"}
    assert after.get("made_ms") is None

"""A part the app already holds costs no upstream call and no data (docs/protocol.md: Part
endpoints): a request whose tag is valid and whose content tag is still the current one is
answered `{"orderid", "tag", "unchanged": true}`, on the order's owner's request alone."""

from __future__ import annotations

import json

import pytest
from aiohttp.test_utils import TestClient

from shared.protocol.tags import decode_tag
from tests.emulator_api import ORDER_CORE, advance, calls, create_order_id
from tests.helpers import MakeApp

FAST = "/mlutp/v1/taxi/fast_info"


@pytest.fixture
async def unmemoised(make_orders_state: MakeApp) -> TestClient:
    # every part request that needs data reaches the upstream: no recent fetch answers it
    return await make_orders_state(protocol={"part_fetches": {"recent_memo_bytes": 0}})


async def part(client: TestClient, user: str, orderid: str, tag: str | None = None) -> bytes:
    order = {"orderid": orderid, **({"tag": tag} if tag else {})}
    resp = await client.post(FAST, json={"orders": [order]}, headers={"X-Yandex-UID": user})
    assert resp.status == 200, await resp.text()
    return await resp.read()


async def test_a_part_whose_tag_is_current_is_unchanged_with_no_upstream_call_and_no_data(
    unmemoised: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    full = await part(unmemoised, unique, orderid)
    [fetched] = json.loads(full)["orders"]
    before = await calls(emulator, ORDER_CORE)
    again = await part(unmemoised, unique, orderid, fetched["tag"])
    [answered] = json.loads(again)["orders"]
    assert set(answered) == {"orderid", "tag", "unchanged"} and answered["unchanged"] is True
    assert await calls(emulator, ORDER_CORE) == before
    # a new tag of the same content: the app keeps its fields under it
    held, renewed = decode_tag(fetched["tag"]), decode_tag(answered["tag"])
    assert held is not None and renewed is not None
    assert renewed.content == held.content and renewed.issued_ms >= held.issued_ms
    # its order id, a tag and a flag: about a tenth of the emulator's driving fast_info (108 of
    # 1,061 bytes with a 32-character order id)
    assert 8 * len(again) <= len(full), (len(again), len(full))


async def test_a_part_whose_content_changed_since_its_tag_is_sent_in_full(
    unmemoised: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    [fetched] = json.loads(await part(unmemoised, unique, orderid))["orders"]
    await advance(emulator, "taxi", orderid)
    before = await calls(emulator, ORDER_CORE)
    [answered] = json.loads(await part(unmemoised, unique, orderid, fetched["tag"]))["orders"]
    assert "unchanged" not in answered and answered["status"] != fetched["status"]
    assert await calls(emulator, ORDER_CORE) == before + 1


async def test_another_user_naming_the_order_with_its_current_tag_learns_nothing(
    unmemoised: TestClient, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    [fetched] = json.loads(await part(unmemoised, unique, orderid))["orders"]
    [answered] = json.loads(await part(unmemoised, f"{unique}-other", orderid, fetched["tag"]))[
        "orders"
    ]
    # asked of the upstream for that user, as any request without a current tag
    assert "unchanged" not in answered and "status" not in answered
    assert answered["error"]["update_status"] in {"expired", "stale"}

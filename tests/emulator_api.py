"""The emulator's control API as tests use it: create, advance and change orders, set
faults, read the calls it served. Every helper asserts that the emulator accepted the call."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

# the default policy's taxi parts' own upstreams, as the emulator names their stats and fault
# targets: each part from the service its data lives in (docs/protocol.md: Part endpoints)
ORDER_CORE = "part:order_core"  # fast_info
PART_UPSTREAMS = {
    "fast_info": ORDER_CORE,
    "rarely_changed": "part:order_settings",
    "static": "part:order_static",
    "chat": "part:orderchat",
    "slow": "part:orderperformerinfo",
}


async def _post(emulator: TestClient, path: str, body: dict[str, Any] | None = None) -> Any:
    resp = await emulator.post(path, json=body if body is not None else {})
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def create_order(
    emulator: TestClient, user: str, service: str = "taxi", status: str | None = None
) -> dict[str, Any]:
    """A new active order of `user`: the emulator's answer (orderid, status, version, ...)."""
    body: dict[str, Any] = {"user_id": user, "service": service}
    if status is not None:
        body["status"] = status
    created: dict[str, Any] = await _post(emulator, "/emulator/v1/orders", body)
    return created


async def create_order_id(
    emulator: TestClient, user: str, service: str = "taxi", status: str | None = None
) -> str:
    orderid: str = (await create_order(emulator, user, service, status))["orderid"]
    return orderid


async def advance(emulator: TestClient, service: str, orderid: str) -> dict[str, Any]:
    """The order's next status in its lifecycle (tags bumped like a feature service would)."""
    changed: dict[str, Any] = await _post(
        emulator, f"/emulator/v1/orders/{service}/{orderid}/advance"
    )
    return changed


async def change(
    emulator: TestClient, service: str, orderid: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """Changes upstream fields of the order and bumps the tags of the parts holding them."""
    changed: dict[str, Any] = await _post(
        emulator, f"/emulator/v1/orders/{service}/{orderid}/change", {"fields": fields}
    )
    return changed


async def set_fault(emulator: TestClient, target: str, mode: str, delay_ms: int = 0) -> None:
    await _post(
        emulator, "/emulator/v1/faults", {"target": target, "mode": mode, "delay_ms": delay_ms}
    )


async def stats(emulator: TestClient) -> dict[str, Any]:
    """Calls served per upstream endpoint since start, with recent headers and bodies."""
    resp = await emulator.get("/emulator/v1/stats")
    assert resp.status == 200, await resp.text()
    result: dict[str, Any] = await resp.json()
    return result


async def calls(emulator: TestClient, target: str) -> int:
    """Calls the emulator served on one upstream endpoint since start."""
    count: int = (await stats(emulator))["calls"].get(target, 0)
    return count


async def totw(emulator: TestClient, user: str, orderid: str) -> dict[str, Any]:
    """The order's whole totw document, as the user's legacy client would fetch it."""
    resp = await emulator.post(
        "/3.0/taxiontheway", json={"orderid": orderid}, headers={"X-Yandex-UID": user}
    )
    assert resp.status == 200, await resp.text()
    doc: dict[str, Any] = await resp.json()
    return doc


async def part_service(emulator: TestClient, name: str, user: str, orderid: str) -> dict[str, Any]:
    """What one of the taxi part services (`/parts/<name>`) answers the user for the order."""
    resp = await emulator.post(
        f"/parts/{name}", json={"orderid": orderid}, headers={"X-Yandex-UID": user}
    )
    assert resp.status == 200, await resp.text()
    doc: dict[str, Any] = await resp.json()
    return doc


async def set_taxi_parts_fault(
    emulator: TestClient,
    mode: str,
    parts: tuple[str, ...] = ("fast_info", "rarely_changed", "static", "chat"),
) -> None:
    """The same fault on each of these taxi parts' own upstreams (by default every part's but
    `slow`'s, as one on totw did when they all came from it)."""
    for part in parts:
        await set_fault(emulator, PART_UPSTREAMS[part], mode)


async def source_calls(emulator: TestClient, user: str) -> int:
    """Order source calls the emulator served for this user."""
    resp = await emulator.get("/emulator/v1/stats", params={"user_id": user})
    assert resp.status == 200
    served: dict[str, int] = (await resp.json())["calls"]
    return sum(count for target, count in served.items() if target.startswith("source:"))

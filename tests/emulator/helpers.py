from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient


async def create_order(
    emulator: TestClient, user_id: str, service: str = "taxi", status: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"user_id": user_id, "service": service}
    if status is not None:
        body["status"] = status
    resp = await emulator.post("/emulator/v1/orders", json=body)
    assert resp.status == 200, await resp.text()
    created: dict[str, Any] = await resp.json()
    return created


async def stats(emulator: TestClient) -> dict[str, Any]:
    result: dict[str, Any] = await (await emulator.get("/emulator/v1/stats")).json()
    return result


async def set_fault(emulator: TestClient, target: str, mode: str, delay_ms: int = 0) -> None:
    resp = await emulator.post(
        "/emulator/v1/faults", json={"target": target, "mode": mode, "delay_ms": delay_ms}
    )
    assert resp.status == 200, await resp.text()

"""docs/protocol.md: Polling orders, "Nothing new": the answer_tag exchange passes stock HTTP
clients' default success checks, against a real orders_state. A 304 did not (issue 49:
httpx's raise_for_status raised on it, requests' .json() did, Node's fetch said ok: false);
a 204 is a 2xx: each takes it as success, and its body as empty."""

from __future__ import annotations

import asyncio
import json
import shutil
import textwrap
from typing import Any

import httpx
import pytest
import requests
from aiohttp.test_utils import TestClient

from tests.emulator_api import create_order_id

PATH = "/mlutp/v1/orders/state"
POLL: dict[str, Any] = {"supported_services": ["taxi"]}


async def test_httpx_raise_for_status_passes_on_a_200_and_on_the_204_that_follows(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    url = str(orders_state.make_url(PATH))
    async with httpx.AsyncClient(headers={"X-Yandex-UID": unique}) as client:
        first = (await client.post(url, json=POLL)).raise_for_status()
        held = first.json()["answer_tag"]
        again = (await client.post(url, json={**POLL, "answer_tag": held})).raise_for_status()
    assert again.status_code == 204 and again.is_success and again.content == b""
    assert again.headers["X-Yataxi-Polling-Interval-Ms"]


async def test_requests_usage_passes_on_the_204_it_gets_for_nothing_new(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    """The usual requests code: raise_for_status(), then the body only when there is one
    (`response.ok` and a 204's empty content are how it says so)."""
    await create_order_id(emulator, unique, status="driving")
    url = str(orders_state.make_url(PATH))

    def poll(body: dict[str, Any]) -> requests.Response:
        # a blocking client: in a thread, so that the server in this loop answers it
        response = requests.post(url, json=body, headers={"X-Yandex-UID": unique}, timeout=10)
        response.raise_for_status()
        return response

    first = await asyncio.to_thread(poll, POLL)
    assert first.ok and first.json()["orders"]
    again = await asyncio.to_thread(poll, {**POLL, "answer_tag": first.json()["answer_tag"]})
    assert again.ok and again.status_code == 204 and again.content == b""


NODE_POLL = textwrap.dedent(
    """
    const [url, user] = process.argv.slice(-2);
    const post = (body) => fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Yandex-UID": user },
      body: JSON.stringify(body),
    });
    const poll = { supported_services: ["taxi"] };
    const first = await post(poll);
    if (!first.ok) throw new Error(`first poll: ${first.status}`);
    const { answer_tag: held, orders } = await first.json();
    const again = await post({ ...poll, answer_tag: held });
    if (!again.ok) throw new Error(`nothing new: ${again.status}`);
    console.log(JSON.stringify({
      first: first.status, orders: orders.length, again: again.status, ok: again.ok,
      body: await again.text(),
      interval: again.headers.get("X-Yataxi-Polling-Interval-Ms"),
    }));
    """
)


async def test_node_fetch_says_ok_on_the_204_for_nothing_new(
    orders_state: TestClient, emulator: TestClient, unique: str
):
    node = shutil.which("node")
    if node is None:
        pytest.skip("SKIPPED: no node here; .ci/run installs it")
    await create_order_id(emulator, unique, status="driving")
    url = str(orders_state.make_url(PATH))
    process = await asyncio.create_subprocess_exec(
        node,
        "--input-type=module",
        "-e",
        NODE_POLL,
        url,
        unique,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["first"] == 200 and seen["orders"] == 1
    assert seen["again"] == 204 and seen["ok"] is True and seen["body"] == ""
    assert int(seen["interval"]) > 0

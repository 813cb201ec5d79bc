"""Helpers for tests that run the services as processes (devtools.stack.Stack): the
environment of a stack of their own, the emulator's control API and totw over HTTP, and the
services' /metrics."""

from __future__ import annotations

import os
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from devtools.stack import Stack, free_ports_env
from tests.helpers import cut

UID = "X-Yandex-UID"


def stack_env(**extra: str) -> dict[str, str]:
    """This process's environment for a stack of the test's own: free ports, an embedded Redis
    (no REDIS_URL or cluster of anyone else's), quiet logs, and no min TTL to wait out (a
    change is seen on the next cycle); `extra` on top."""
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env.pop("REDIS_CLUSTER_NODES", None)
    env.update(free_ports_env())
    env.update({"LOG_LEVEL": "WARNING", "MLUTP_MIN_TTL_S": "0", **extra})
    return env


async def emulator_post(
    session: aiohttp.ClientSession, stack: Stack, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    async with session.post(f"{stack.url('emulator')}{path}", json=body or {}) as response:
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
        return answer


async def totw_fields(
    session: aiohttp.ClientSession, stack: Stack, user: str, orderid: str
) -> dict[str, Any]:
    """The order's totw document as the parts' fields make it up."""
    async with session.post(
        f"{stack.url('emulator')}/3.0/taxiontheway", json={"orderid": orderid}, headers={UID: user}
    ) as response:
        doc: dict[str, Any] = await response.json()
    return cut(doc)


async def samples(session: aiohttp.ClientSession, url: str, name: str) -> list[Sample]:
    """A metric's samples in one process's /metrics."""
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    return [
        sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


async def metric(session: aiohttp.ClientSession, url: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples (with those labels) in one process's /metrics."""
    return sum(
        sample.value
        for sample in await samples(session, url, name)
        if all(sample.labels.get(k) == v for k, v in labels.items())
    )

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
    (no REDIS_URL or cluster of anyone else's), quiet logs; `extra` on top."""
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env.pop("REDIS_CLUSTER_NODES", None)
    env.update(free_ports_env())
    env.update({"LOG_LEVEL": "WARNING", **extra})
    return env


def stack_settings(
    protocol: dict[str, Any] | None = None, **per_service: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Settings of the test's stack no variable reaches (Stack's `settings`): no min TTL to
    wait out in the client-facing services (a change is seen on the next cycle), `protocol`
    on top of that, and `per_service` settings besides."""
    protocol = {"min_ttl_s": 0, **(protocol or {})}
    settings: dict[str, dict[str, Any]] = {
        "orders_state": {"protocol": protocol},
        "launch": {"protocol": protocol},
    }
    for name, values in per_service.items():
        settings[name] = {**settings.get(name, {}), **values}
    return settings


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

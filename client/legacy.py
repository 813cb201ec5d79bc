"""The old way, as the baseline: every active order's whole document fetched every 5 s
(iOS) or 10 s (Android), whether anything changed or not."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from client.client import ClientStats, VersionSeen

FINAL_STATUSES = frozenset({"complete", "delivered"})


class LegacyClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        launch_url: str,
        document_urls: Mapping[str, str],
        user_id: str,
        period_s: float,
        supported_services: tuple[str, ...] = ("taxi", "eats", "grocery"),
        on_version_seen: VersionSeen | None = None,
    ) -> None:
        self.session = session
        self.launch_url = launch_url
        # service → its heavy per-order endpoint (totw for taxi, details for eats/grocery)
        self.document_urls = document_urls
        self.user_id = user_id
        self.period_s = period_s
        self.supported_services = supported_services
        self.on_version_seen = on_version_seen
        self.stats = ClientStats()
        self.orders: list[tuple[str, str]] = []
        self._seen: dict[tuple[str, str], int] = {}

    async def _post(self, url: str, body: dict[str, Any], *, poll: bool) -> tuple[int, Any]:
        started = time.monotonic()
        self.stats.requests += 1
        try:
            async with self.session.post(
                url,
                json=body,
                headers={"X-Yandex-UID": self.user_id},
                timeout=aiohttp.ClientTimeout(total=5),
            ) as response:
                payload = await response.read()
                self.stats.bytes_received += len(payload)
                if poll:
                    self.stats.poll_latencies.append(time.monotonic() - started)
                if response.status != 200:
                    if response.status != 404:
                        self.stats.errors += 1
                    return response.status, None
                return 200, await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            self.stats.errors += 1
            return 0, None

    async def launch(self) -> None:
        status, answer = await self._post(
            self.launch_url, {"supported_services": list(self.supported_services)}, poll=False
        )
        if status == 200:
            orders = answer["mlutp_orders_state"]["orders"]
            self.orders = [(o["service"], o["orderid"]) for o in orders]

    async def tick(self) -> None:
        if not self.orders:
            await self.launch()
        finished = False
        for service, orderid in list(self.orders):
            status, document = await self._post(
                self.document_urls[service], {"orderid": orderid}, poll=True
            )
            if status == 404 or (document and document.get("status") in FINAL_STATUSES):
                self.orders.remove((service, orderid))
                finished = True
                continue
            if document is not None:
                version = document.get("version")
                key = (service, orderid)
                if isinstance(version, int) and version > self._seen.get(key, 0):
                    self._seen[key] = version
                    if self.on_version_seen is not None:
                        self.on_version_seen(service, orderid, version, time.time())
        if finished:
            await self.launch()  # the app learns of the user's next order at launch

    async def run(self, stop: asyncio.Event) -> None:
        await self.launch()
        while not stop.is_set():
            await self.tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.period_s)

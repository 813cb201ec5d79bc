"""The old way, as the baseline: every active order's whole document fetched every 5 s
(iOS) or 10 s (Android), whether anything changed or not."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from client.model import VersionSeen
from client.transport import ClientStats

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
        # orders the user just created, fetched before the next period
        self._created: list[tuple[str, str]] = []
        self._created_event = asyncio.Event()

    async def _post(self, url: str, body: dict[str, Any], *, poll: bool) -> tuple[int, Any]:
        started = time.monotonic()
        self.stats.requests += 1
        # encoded here, as aiohttp's json= would, to count the bytes sent
        sent = json.dumps(body).encode()
        try:
            async with self.session.post(
                url,
                data=sent,
                headers={"X-Yandex-UID": self.user_id, "Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=5),
            ) as response:
                payload = await response.read()
                self.stats.received(url, len(payload))
                self.stats.exchanged(response, sent, payload)
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
            # a finished trip awaiting its rating shows the rating screen: nothing to poll
            self.orders = [
                (o["service"], o["orderid"]) for o in orders if o["status"] not in FINAL_STATUSES
            ]

    async def _fetch(self, service: str, orderid: str) -> bool:
        """One order's whole document; True when the order has finished (it is dropped)."""
        status, document = await self._post(
            self.document_urls[service], {"orderid": orderid}, poll=True
        )
        if status == 404 or (document and document.get("status") in FINAL_STATUSES):
            if (service, orderid) in self.orders:
                self.orders.remove((service, orderid))
            return True
        if document is not None:
            version = document.get("version")
            key = (service, orderid)
            if isinstance(version, int) and version > self._seen.get(key, 0):
                self._seen[key] = version
                if self.on_version_seen is not None:
                    self.on_version_seen(service, orderid, version, time.time())
        return False

    async def tick(self) -> None:
        if not self.orders:
            await self.launch()
        finished = False
        for service, orderid in list(self.orders):
            finished |= await self._fetch(service, orderid)
        if finished:
            await self.launch()  # the app learns of the user's next order at launch

    def order_created(self, service: str, orderid: str, status: str) -> None:
        """The user made an order in this app: its document is fetched at once, then with
        the others every period."""
        if (service, orderid) not in self.orders:
            self.orders.append((service, orderid))
            self._created.append((service, orderid))
            self._created_event.set()

    async def run(self, stop: asyncio.Event) -> None:
        await self.launch()
        loop = asyncio.get_running_loop()
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                await self.tick()
                next_tick = loop.time() + self.period_s
                while not stop.is_set() and loop.time() < next_tick:
                    created = asyncio.ensure_future(self._created_event.wait())
                    await asyncio.wait(
                        [stopped, created],
                        timeout=next_tick - loop.time(),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    created.cancel()
                    self._created_event.clear()
                    while self._created and not stop.is_set():
                        await self._fetch(*self._created.pop(0))
        finally:
            stopped.cancel()

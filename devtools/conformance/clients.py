"""The clients under test: the Python reference client run in this process, or an app the
team runs itself (`--external`), pointed at the pass-through by hand."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Protocol

import aiohttp

from client.client import MlutpClient
from client.model import ClientOptions, OrderView, Position


class ClientUnderTest(Protocol):
    name: str
    # how long the client waits for a user change to show before it gives up on it (the
    # design's default: 15 s)
    change_deadline_s: float

    async def start(self, user: str, launch_url: str, orders_state_url: str) -> None: ...

    async def restart(self) -> None:
        """The app stops and starts again, keeping what it saved."""

    async def change(self, service: str, orderid: str, feature: str, value: object) -> None:
        """The user changes the order in the app."""

    async def wait_shown(self, orderid: str, status: str) -> float | None:
        """When (monotonic seconds) the app's view first showed the order in this status,
        waiting until it does; None at once for an app whose view the kit cannot see."""

    async def stop(self) -> None: ...

    async def close(self) -> None:
        """After the last scenario."""


# the kit's reference clients: waiting polls, as apps make them, but short ones (a scenario
# waits out a whole wait each time it waits for "one poll more"); user changes given up on
# sooner, so that a scenario that waits out two deadlines takes seconds
KIT_OPTIONS = ClientOptions(change_deadline_s=4.0, wait_ms=2000)
# where the kit's app says it is: an app that knows its position sends it with every totw part
# request, so the kit sees (and checks) its shape; the browser client's page says the same
KIT_POSITION = Position((37.6, 55.7), 1009)


class PythonClient:
    name = "python"

    def __init__(
        self,
        state_dir: Path,
        options: ClientOptions = KIT_OPTIONS,
        position: Position | None = KIT_POSITION,
    ) -> None:
        self.state_dir = state_dir
        self.options = options
        self.position = position
        self.change_deadline_s = options.change_deadline_s
        self._session: aiohttp.ClientSession | None = None
        self._run: tuple[asyncio.Event, asyncio.Task[None]] | None = None
        self._client: MlutpClient | None = None
        self._where: tuple[str, str, str] | None = None
        # (when, orderid, status) of every view the client published, in order
        self._shown: list[tuple[float, str, str]] = []
        self._published = asyncio.Condition()

    async def start(self, user: str, launch_url: str, orders_state_url: str) -> None:
        self._where = (user, launch_url, orders_state_url)
        self._session = aiohttp.ClientSession()
        self._launch()

    def _launch(self) -> None:
        assert self._session is not None and self._where is not None
        user, launch_url, orders_state_url = self._where
        options = dataclasses.replace(self.options, state_file=self.state_dir / f"{user}.json")
        client = MlutpClient(
            self._session,
            launch_url=launch_url,
            orders_state_url=orders_state_url,
            user_id=user,
            options=options,
            # through the pass-through as well: the kit sees the changes and their answers
            features_url=f"{orders_state_url}/emulator/v1/features",
        )
        client.position = self.position
        self._client = client
        client.views.on_change = self._on_change
        stop = asyncio.Event()
        self._run = (stop, asyncio.create_task(client.run(stop), name=f"client:{user}"))

    async def _halt(self) -> None:
        if self._run is not None:
            stop, task = self._run
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._run = None

    def _on_change(self, views: list[OrderView]) -> None:
        now = time.monotonic()
        self._shown += [(now, view.orderid, view.status) for view in views]
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._published:
            self._published.notify_all()

    async def wait_shown(self, orderid: str, status: str) -> float | None:
        def first() -> float | None:
            return next((t for t, o, s in self._shown if o == orderid and s == status), None)

        async with self._published:
            await self._published.wait_for(lambda: first() is not None)
        return first()

    async def restart(self) -> None:
        await self._halt()
        self._launch()

    async def change(self, service: str, orderid: str, feature: str, value: object) -> None:
        assert self._client is not None
        await self._client.change(service, orderid, feature, value)

    async def stop(self) -> None:
        await self._halt()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def close(self) -> None:
        await self.stop()


class ExternalClient:
    """An app the team runs itself: the kit says where to point it and for which user, and
    waits until that user's first launch comes through."""

    name = "external"

    def __init__(self, change_deadline_s: float = 15.0) -> None:
        self.change_deadline_s = change_deadline_s

    async def start(self, user: str, launch_url: str, orders_state_url: str) -> None:
        print(
            f"point the app at launch {launch_url} and orders_state {orders_state_url}, "
            f"as user {user} (X-Yandex-UID), and start it",
            flush=True,
        )

    async def restart(self) -> None:
        print("restart the app now (it must keep its saved state)", flush=True)

    async def change(self, service: str, orderid: str, feature: str, value: object) -> None:
        print(f"in the app, change the {feature} of {service} order {orderid} to {value!r}")

    async def wait_shown(self, orderid: str, status: str) -> float | None:
        return None

    async def stop(self) -> None:
        print("stop the app now", flush=True)

    async def close(self) -> None:
        print("the kit is done", flush=True)

"""The clients under test: the Python reference client run in this process, or an app the
team runs itself (`--external`), pointed at the pass-through by hand."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Protocol

import aiohttp

from client.client import MlutpClient
from client.model import ClientOptions


class ClientUnderTest(Protocol):
    name: str

    async def start(self, user: str, launch_url: str, orders_state_url: str) -> None: ...

    async def restart(self) -> None:
        """The app stops and starts again, keeping what it saved."""

    async def change(self, service: str, orderid: str, feature: str, value: object) -> None:
        """The user changes the order in the app."""

    async def stop(self) -> None: ...


class PythonClient:
    name = "python"

    def __init__(self, state_dir: Path, options: ClientOptions | None = None) -> None:
        self.state_dir = state_dir
        self.options = options or ClientOptions(poll_route=False)
        self._session: aiohttp.ClientSession | None = None
        self._run: tuple[asyncio.Event, asyncio.Task[None]] | None = None
        self._client: MlutpClient | None = None
        self._where: tuple[str, str, str] | None = None

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
        self._client = client
        stop = asyncio.Event()
        self._run = (stop, asyncio.create_task(client.run(stop), name=f"client:{user}"))

    async def _halt(self) -> None:
        if self._run is not None:
            stop, task = self._run
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._run = None

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


class ExternalClient:
    """An app the team runs itself: the kit says where to point it and for which user, and
    waits until that user's first launch comes through."""

    name = "external"

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

    async def stop(self) -> None:
        print("stop the app now", flush=True)

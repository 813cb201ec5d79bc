"""A TCP relay that counts the payload crossing it both ways, every header and frame included:
what a mobile network carries between an app and its gateway (devtools/gateway.py puts one in
front of each of nginx's listeners)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Counted:
    """What crossed one proxy: TCP payload both ways, and how each connection began."""

    up: int = 0
    down: int = 0
    connections: int = 0
    # connections still being relayed
    open: int = 0
    # the first bytes of each connection, each way
    first_up: list[bytes] = field(default_factory=list)
    first_down: list[bytes] = field(default_factory=list)


class CountingProxy:
    """A TCP relay from a port of its own to `target_port` on loopback, counting the payload
    both ways (what a mobile network carries between the app and the gateway)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.counted = Counted()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def reset(self) -> Counted:
        counted, self.counted = self.counted, Counted()
        return counted

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        counted = self.counted
        counted.connections += 1
        counted.open += 1
        relay = asyncio.current_task()
        if relay is not None:
            self._relays.add(relay)
            relay.add_done_callback(self._relays.discard)
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            counted.open -= 1
            return
        try:
            await asyncio.gather(
                self._pipe(client_r, server_w, counted, up=True),
                self._pipe(server_r, client_w, counted, up=False),
            )
        finally:
            counted.open -= 1
            client_w.close()
            server_w.close()

    async def settled(self, timeout_s: float = 5.0) -> Counted:
        """What crossed since the last reset, once every connection of it has ended (its last
        bytes relayed), and a fresh count from then on."""
        if self._relays:
            await asyncio.wait(set(self._relays), timeout=timeout_s)
        return self.reset()

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, counted: Counted, *, up: bool
    ) -> None:
        first = True
        try:
            while chunk := await reader.read(65536):
                if up:
                    counted.up += len(chunk)
                else:
                    counted.down += len(chunk)
                if first:
                    (counted.first_up if up else counted.first_down).append(chunk[:64])
                    first = False
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(ConnectionError, OSError):
                if writer.can_write_eof():
                    writer.write_eof()
                else:
                    writer.close()

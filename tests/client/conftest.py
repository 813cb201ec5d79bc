"""The reference client against a real stack on real ports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from client.client import MlutpClient
from client.model import ClientOptions
from services.bff.config import ProtocolSettings
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from tests.helpers import bff_kwargs, protocol_for_tests

# no min TTL: a test sees a change on the next cycle without waiting
NO_MIN_TTL = protocol_for_tests(min_ttl_s=0)


@pytest.fixture
def protocol() -> ProtocolSettings:
    return NO_MIN_TTL


@pytest.fixture
async def bff_urls(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
    protocol: ProtocolSettings,
) -> tuple[str, str]:
    kwargs = bff_kwargs(order_tags_server, emulator_server, protocol)
    state = await aiohttp_server(create_orders_state(OrdersStateSettings(**kwargs)))
    launch = await aiohttp_server(create_launch(LaunchSettings(**kwargs)))
    return str(launch.make_url("/4.0/launch")), str(state.make_url(""))


@pytest.fixture
async def make_client(
    bff_urls: tuple[str, str], emulator_server: TestServer
) -> AsyncIterator[Callable[[str], MlutpClient]]:
    session = aiohttp.ClientSession()

    def make(user: str, options: ClientOptions | None = None) -> MlutpClient:
        return MlutpClient(
            session,
            launch_url=bff_urls[0],
            orders_state_url=bff_urls[1],
            user_id=user,
            options=options or ClientOptions(backoff_base_s=0, poll_route=False),
            features_url=str(emulator_server.make_url("/emulator/v1/features")),
        )

    yield make  # type: ignore[misc]
    await session.close()

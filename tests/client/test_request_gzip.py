"""The reference client gzips a request body where it pays (docs/protocol.md: Request bodies):
a poll with its known orders goes with `Content-Encoding: gzip`, fewer bytes than its JSON; a
body under the threshold goes plain; and a client that never gzips (the fallback every app
may be) is served the same."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.typedefs import Handler

from client.client import MlutpClient
from client.model import ClientOptions
from client.transport import GZIP_MIN_BYTES
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from tests.emulator_api import advance, create_order_id, totw
from tests.helpers import bff_kwargs, protocol_for_tests

STATE = "/mlutp/v1/orders/state"


@dataclass(frozen=True)
class Arrived:
    """A request as it reached the server: its path, coding, bytes on the wire, decoded body."""

    path: str
    encoding: str | None
    wire_bytes: int
    body: bytes


@pytest.fixture
async def served(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
) -> AsyncIterator[tuple[list[Arrived], Callable[[str, ClientOptions], MlutpClient]]]:
    """launch and orders_state, each request inspected as it arrives (its Content-Length is
    what crossed; aiohttp hands the handler the decoded body); and a maker of clients."""
    arrived: list[Arrived] = []

    @web.middleware
    async def inspect(request: web.Request, handler: Handler) -> web.StreamResponse:
        body = await request.read()
        arrived.append(
            Arrived(
                request.path,
                request.headers.get("Content-Encoding"),
                int(request.headers.get("Content-Length", "0")),
                body,
            )
        )
        return await handler(request)

    kwargs = bff_kwargs(order_tags_server, emulator_server, protocol_for_tests(min_ttl_s=0))
    apps = [
        create_orders_state(OrdersStateSettings(**kwargs)),
        create_launch(LaunchSettings(**kwargs)),
    ]
    for app in apps:
        app.middlewares.insert(0, inspect)
    state, launch = [await aiohttp_server(app) for app in apps]
    session = aiohttp.ClientSession()

    def make(user: str, options: ClientOptions) -> MlutpClient:
        return MlutpClient(
            session,
            launch_url=str(launch.make_url("/4.0/launch")),
            orders_state_url=str(state.make_url("")),
            user_id=user,
            options=options,
        )

    yield arrived, make
    await session.close()


async def test_a_poll_over_the_threshold_goes_gzipped_and_smaller(
    served: tuple[list[Arrived], Callable[[str, ClientOptions], MlutpClient]],
    emulator: TestClient,
    unique: str,
):
    arrived, make = served
    orderid = await create_order_id(emulator, unique, status="driving")
    client = make(unique, ClientOptions(backoff_base_s=0, poll_route=False))
    await client.launch()
    await client.cycle()
    polls = [a for a in arrived if a.path == STATE]
    assert polls and all(len(p.body) >= GZIP_MIN_BYTES for p in polls)
    for poll in polls:
        assert poll.encoding == "gzip"
        # what crossed is the gzip of the JSON the server read, and far smaller than it
        assert poll.wire_bytes == len(gzip.compress(poll.body, 6, mtime=0))
        assert poll.wire_bytes < len(poll.body) * 0.8
        assert json.loads(poll.body)["known_orders"][0]["orderid"] == orderid
    # the client counts what it sent: the gzipped body, and the plain JSON beside it
    assert 0 < client.stats.wire["request_body_gzip"] < client.stats.wire["request_body"]
    # the server read the gzipped poll as the poll it is: a change is seen
    await advance(emulator, "taxi", orderid)
    await client.cycle()
    [view] = client.view()
    assert view.status == "waiting"


async def test_a_body_under_the_threshold_goes_plain(
    served: tuple[list[Arrived], Callable[[str, ClientOptions], MlutpClient]],
    emulator: TestClient,
    unique: str,
):
    """A part request of one order is under the threshold: gzip's own bytes would cost more
    than they save."""
    arrived, make = served
    await create_order_id(emulator, unique, status="driving")
    client = make(
        unique,
        ClientOptions(backoff_base_s=0, poll_route=False, extended_order_info=False),
    )
    await client.launch()
    await client.cycle()
    parts = [a for a in arrived if a.path not in (STATE, "/4.0/launch")]
    assert parts, "the client fetched no part"
    small = [p for p in parts if len(p.body) < GZIP_MIN_BYTES]
    assert small
    assert all(p.encoding is None and p.wire_bytes == len(p.body) for p in small)


async def test_a_client_that_never_gzips_is_served_the_same(
    served: tuple[list[Arrived], Callable[[str, ClientOptions], MlutpClient]],
    emulator: TestClient,
    unique: str,
):
    """The fallback: every body plain, whatever its size; the same orders and parts shown."""
    arrived, make = served
    orderid = await create_order_id(emulator, unique, status="driving")
    plain = make(unique, ClientOptions(backoff_base_s=0, poll_route=False, gzip_min_bytes=None))
    gzipping = make(unique, ClientOptions(backoff_base_s=0, poll_route=False))
    for client in (plain, gzipping):
        await client.launch()
        await client.cycle()
    plain_polls = [a for a in arrived if a.path == STATE and a.encoding is None]
    assert plain_polls and all(len(p.body) >= GZIP_MIN_BYTES for p in plain_polls)
    await advance(emulator, "taxi", orderid)
    for client in (plain, gzipping):
        await client.cycle()
    assert plain.view() == gzipping.view()
    [view] = plain.view()
    assert view.status == "waiting"
    assert view.data["status"] == (await totw(emulator, unique, orderid))["status"]

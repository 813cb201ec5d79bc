"""The reference client's digest request (docs/protocol.md: The digest request): a poll that
repeats the body it sent last, answered, goes as that body's digest alone; where the server
does not keep the body (a restart, another replica) the full body goes at once, no error and no
backoff; and a client told never to send one sends every body in full."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.typedefs import Handler

from client.client import MlutpClient
from client.model import ClientOptions
from client.transport import request_digest as client_digest
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.protocol.request_digest import request_digest
from tests.emulator_api import advance, create_order_id
from tests.helpers import bff_kwargs, protocol_for_tests

STATE = "/mlutp/v1/orders/state"
OPTIONS = ClientOptions(backoff_base_s=0, poll_route=False)


@dataclass
class Stack:
    """launch and orders_state, each orders/state body recorded as it arrived (decoded) with
    its status; orders_state can be restarted on its port with nothing kept."""

    polls: list[tuple[bytes, int]] = field(default_factory=list)
    launch_url: str = ""
    state_url: str = ""
    restart: Callable[[], Awaitable[None]] | None = None

    def client(self, session: aiohttp.ClientSession, user: str, **options: object) -> MlutpClient:
        return MlutpClient(
            session,
            launch_url=self.launch_url,
            orders_state_url=self.state_url,
            user_id=user,
            options=ClientOptions(**{**vars(OPTIONS), **options}),  # type: ignore[arg-type]
        )


@pytest.fixture
async def stack(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
    order_tags_server: TestServer,
    emulator_server: TestServer,
) -> AsyncIterator[Stack]:
    stack = Stack()
    kwargs = bff_kwargs(order_tags_server, emulator_server, protocol_for_tests(min_ttl_s=0))

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        body = await request.read()
        response = await handler(request)
        if request.path == STATE:
            stack.polls.append((body, response.status))
        return response

    def orders_state() -> web.Application:
        app = create_orders_state(OrdersStateSettings(**kwargs))
        app.middlewares.insert(0, record)
        return app

    servers = [await aiohttp_server(orders_state())]
    launch = await aiohttp_server(create_launch(LaunchSettings(**kwargs)))
    stack.launch_url = str(launch.make_url("/4.0/launch"))
    stack.state_url = str(servers[0].make_url(""))

    async def restart() -> None:
        port = servers[-1].port
        await servers[-1].close()
        servers.append(await aiohttp_server(orders_state(), port=port))

    stack.restart = restart
    yield stack


def is_digest(body: bytes) -> bool:
    return list(json.loads(body)) == ["request_digest"]


def test_the_clients_digest_is_the_servers():
    for body in (b"{}", json.dumps({"known_orders": [], "answer_tag": "x"}).encode()):
        assert client_digest(body) == request_digest(body)


async def test_a_repeated_poll_goes_as_the_digest_of_the_body_sent_last(
    stack: Stack, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    async with aiohttp.ClientSession() as session:
        client = stack.client(session, unique)
        await client.launch()
        for _ in range(3):
            await client.cycle()
        # the first poll names no answer_tag, the second sends it back (a 204), the third
        # repeats the second byte for byte: its digest alone, answered as that body
        (first, _), (second, second_status), (third, third_status) = stack.polls
        assert not is_digest(first) and not is_digest(second) and second_status == 204
        assert json.loads(third) == {"request_digest": request_digest(second)}
        assert third_status == 204
        assert client.stats.digests == 1 and client.stats.errors == 0
        # the answer it stands for is the one shown, and news still comes through it
        await advance(emulator, "taxi", orderid)
        await client.cycle()
        [view] = client.view()
        assert view.status == "waiting"


async def test_after_a_restart_the_client_sends_the_full_body_at_once_and_goes_on(
    stack: Stack, emulator: TestClient, unique: str
):
    orderid = await create_order_id(emulator, unique, status="driving")
    async with aiohttp.ClientSession() as session:
        client = stack.client(session, unique)
        await client.launch()
        for _ in range(3):
            await client.cycle()
        assert is_digest(stack.polls[-1][0])
        assert stack.restart is not None
        await stack.restart()
        del stack.polls[:]
        interval_s = client.interval_s
        await client.cycle()
        # the digest is unknown to the new process: the full body follows in the same cycle
        (digest, unknown), (full, status) = stack.polls
        assert is_digest(digest) and unknown == 400
        assert not is_digest(full) and status == 204
        assert client.stats.digest_misses == 1 and client.stats.errors == 0
        # no backoff: the interval is the server's, as after any answer
        assert client.interval_s == pytest.approx(interval_s, rel=0.5)
        # and on: the next repeat is a digest the new process keeps
        await client.cycle()
        assert is_digest(stack.polls[-1][0]) and stack.polls[-1][1] == 204
        await advance(emulator, "taxi", orderid)
        await client.cycle()
        [view] = client.view()
        assert view.status == "waiting"


async def test_a_client_told_never_to_send_a_digest_sends_every_body_in_full(
    stack: Stack, emulator: TestClient, unique: str
):
    await create_order_id(emulator, unique, status="driving")
    async with aiohttp.ClientSession() as session:
        client = stack.client(session, unique, request_digests=False)
        await client.launch()
        for _ in range(3):
            await client.cycle()
        assert len(stack.polls) == 3
        assert not any(is_digest(body) for body, _ in stack.polls)
        assert stack.polls[-1][1] == 204 and client.stats.digests == 0

"""An upstream call's deadline (docs/protocol.md: Polling interval, admission control): a
timer the process's own busy event loop fires late is moved on, so an answer that came in time
is read before the deadline is judged; with the loop idle the deadline is exact."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from shared.http import RetryPolicy, UpstreamClient

DEADLINE_S = 0.05
SLOW_S = 0.5


class Upstream:
    def __init__(self) -> None:
        self.delay_s = 0.0
        self.received = asyncio.Event()

    async def answer(self, request: web.Request) -> web.Response:
        self.received.set()
        await asyncio.sleep(self.delay_s)  # the upstream's own latency
        return web.json_response({})


@pytest.fixture
async def upstream(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> tuple[Upstream, TestServer]:
    fake = Upstream()
    app = web.Application()
    app.router.add_post("/", fake.answer)
    return fake, await aiohttp_server(app)


def client(server: TestServer, allowance_s: float) -> UpstreamClient:
    return UpstreamClient(
        str(server.make_url("")),
        attempt_timeout_s=DEADLINE_S,
        deadline_s=DEADLINE_S,
        retry=RetryPolicy(attempts=1),
        own_queue_allowance_s=allowance_s,
    )


@pytest.mark.parametrize("allowance_s", [0.0, 0.25])
async def test_a_slow_upstream_times_out_at_its_deadline_while_the_process_is_idle(
    upstream: tuple[Upstream, TestServer], allowance_s: float
):
    fake, server = upstream
    fake.delay_s = SLOW_S
    caller = client(server, allowance_s)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await caller.post("/", b"{}")
    assert time.monotonic() - started < SLOW_S  # not waited out
    await caller.close()


async def answer_while_the_loop_is_busy(caller: UpstreamClient, fake: Upstream) -> int:
    """A call the upstream answers at once, while this process's event loop is held by its
    own work past the call's deadline."""
    call = asyncio.create_task(caller.post("/", b"{}"))
    await fake.received.wait()
    time.sleep(DEADLINE_S * 3)  # noqa: ASYNC251 (the process's own work holds the loop)
    return (await call).status


async def test_an_answer_that_came_in_time_is_read_though_the_process_was_busy(
    upstream: tuple[Upstream, TestServer],
):
    fake, server = upstream
    caller = client(server, allowance_s=0.25)
    assert await answer_while_the_loop_is_busy(caller, fake) == 200
    await caller.close()


async def test_without_an_allowance_the_process_own_queue_times_the_call_out(
    upstream: tuple[Upstream, TestServer],
):
    fake, server = upstream
    caller = client(server, allowance_s=0.0)
    with pytest.raises(TimeoutError):
        await answer_while_the_loop_is_busy(caller, fake)
    await caller.close()

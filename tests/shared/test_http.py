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

from shared.http import CircuitOpenError, Protection, RetryPolicy, UpstreamClient
from shared.protocol.circuit import CircuitBreaker

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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Failing:
    """An upstream that answers 500 until it is mended, counting its calls; a call holds
    until `release` is set, so that calls made together are in flight together."""

    def __init__(self) -> None:
        self.mended = False
        self.calls = 0
        self.release = asyncio.Event()
        self.release.set()
        self.arrived = asyncio.Event()

    async def answer(self, request: web.Request) -> web.Response:
        self.calls += 1
        self.arrived.set()
        await self.release.wait()
        return web.json_response({}, status=200 if self.mended else 500)


async def opened_circuit(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
) -> tuple[Failing, UpstreamClient, Clock]:
    fake = Failing()
    app = web.Application()
    app.router.add_post("/", fake.answer)
    server = await aiohttp_server(app)
    clock = Clock()
    caller = UpstreamClient(
        str(server.make_url("")),
        attempt_timeout_s=1.0,
        deadline_s=1.0,
        retry=RetryPolicy(attempts=1),
        protection=Protection(CircuitBreaker(2, 2.0), clock=clock),
    )
    for _ in range(2):
        assert (await caller.post("/", b"{}")).status == 500
    with pytest.raises(CircuitOpenError):
        await caller.post("/", b"{}")
    clock.now = 2.5  # past the open pause: the next call is the probe
    fake.calls = 0
    fake.arrived.clear()
    return fake, caller, clock


async def test_calls_made_with_the_probe_go_out_once_it_answered(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
):
    fake, caller, _ = await opened_circuit(aiohttp_server)
    fake.mended = True
    fake.release.clear()
    probe = asyncio.create_task(caller.post("/", b"{}"))
    together = asyncio.create_task(caller.post("/", b"{}"))
    # the probe reached the upstream; the call made with it waits on it, not refused
    await fake.arrived.wait()
    assert fake.calls == 1 and not together.done()
    fake.release.set()
    assert [r.status for r in await asyncio.gather(probe, together)] == [200, 200]
    assert fake.calls == 2
    await caller.close()


async def test_a_failed_probe_refuses_the_calls_that_waited_on_it(
    aiohttp_server: Callable[..., Awaitable[TestServer]],
):
    fake, caller, _ = await opened_circuit(aiohttp_server)
    fake.release.clear()
    probe = asyncio.create_task(caller.post("/", b"{}"))
    together = asyncio.create_task(caller.post("/", b"{}"))
    await fake.arrived.wait()
    fake.release.set()
    assert (await probe).status == 500
    with pytest.raises(CircuitOpenError):
        await together
    # the failing upstream got the probe alone
    assert fake.calls == 1
    await caller.close()

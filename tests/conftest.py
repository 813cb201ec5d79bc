"""Fixtures that start real processes: a Redis per test session (never the machine's own),
and the project's apps on it. Everything started here is stopped here."""

from __future__ import annotations

import asyncio
import collections
import os
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import settings

from emulator.app import create_app as create_emulator
from emulator.config import DriverProfile, EmulatorSettings
from emulator.keys import STATS
from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from shared.config import RedisSettings
from shared.embedded_redis import FREE_PORTS_ENV, EmbeddedRedis, free_port_share

TEST_TOKEN = "test-token"

# no per-example deadline: a shared machine is slow at times; on CI the examples are fixed,
# so a run is red only for a change, never for a newly drawn example
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


# lines for the end of the run (the generators' times, the simulation's figures), shown also
# when output is captured
SUMMARY_LINES: list[str] = []
# answers by status (the fuzz and corpus figures), added up over the run's workers
STATUSES: dict[str, Counter[int]] = collections.defaultdict(Counter)


def report_statuses(what: str, statuses: Counter[int]) -> None:
    STATUSES[what].update(statuses)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in SUMMARY_LINES:
        terminalreporter.write_line(line)
    for what, statuses in STATUSES.items():
        by_status = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items()))
        terminalreporter.write_line(f"{what}: {statuses.total()} ({by_status})")


class WorkerSummaries:
    """Under pytest-xdist the tests run in worker processes, and their figures with them: each
    worker hands its figures to the controller as it ends, which shows them at the run's end."""

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput["mlutp_summary_lines"] = list(SUMMARY_LINES)
            workeroutput["mlutp_statuses"] = {what: dict(n) for what, n in STATUSES.items()}

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", {})
        SUMMARY_LINES.extend(output.get("mlutp_summary_lines", []))
        for what, statuses in output.get("mlutp_statuses", {}).items():
            STATUSES[what].update(statuses)


def pytest_configure(config: pytest.Config) -> None:
    # the hooks of xdist's controller exist only where xdist is installed
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(WorkerSummaries(), "mlutp-worker-summaries")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None:
        # each worker its own share of the listening ports, and the stacks it starts with it:
        # a port one worker chose is not yet bound while its server starts, and another
        # worker's free_port would find it free
        index = int(worker.removeprefix("gw"))
        count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
        os.environ[FREE_PORTS_ENV] = free_port_share(index, count)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In an xdist worker, whose order is the one the tests are handed out in: the long tests
    first, so that the run's end is not one of them running alone; of those, the ones that keep
    the cores busy (`cpu_bound`) first of all: the other long ones mostly wait on real time,
    and the run's first minutes left half the CPU idle while the simulation waited its turn
    behind them."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        items.sort(
            key=lambda item: (
                item.get_closest_marker("long") is None,
                item.get_closest_marker("cpu_bound") is None,
            )
        )


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis()
    server.start()
    yield server
    server.close()


@pytest.fixture
def own_redis() -> Iterator[EmbeddedRedis]:
    """A Redis for one test alone, so that killing or pausing it harms nobody else."""
    server = EmbeddedRedis()
    server.start()
    yield server
    server.close()


@pytest.fixture
def redis_sync(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def redis_settings(redis_server: EmbeddedRedis) -> RedisSettings:
    # generous on a noisy machine (a loaded CI run once saw a 0.2 s socket timeout fire under
    # 30 concurrent writes); the fault tests set the real deadlines themselves. A hedge after
    # 0.5 s, not 10 ms: a machine busy with the suite's parallel workers answers late, and a
    # hedged read counts its force twice (order_tags' storage: fewer forces honoured, by
    # design), which the force budget's exact counts are not about; the hedging has tests of
    # its own
    return RedisSettings(
        url=redis_server.url,
        command_deadline_s=1.0,
        socket_timeout_s=1.0,
        connect_timeout_s=1.0,
        hedge_after_s=0.5,
    )


@pytest.fixture
def unique() -> str:
    """A fresh id prefix, so tests sharing the session's Redis never see each other's keys."""
    return uuid.uuid4().hex[:12]


@pytest.fixture
async def order_tags_server(
    aiohttp_server: Callable[..., Awaitable[TestServer]], redis_settings: RedisSettings
) -> TestServer:
    """order_tags on a real port, for services that reach it over HTTP."""
    settings = OrderTagsSettings(port=0, service_token=TEST_TOKEN, redis=redis_settings)
    return await aiohttp_server(create_order_tags(settings))


def emulator_settings(order_tags: TestServer, **driver: object) -> EmulatorSettings:
    return EmulatorSettings(
        port=0,
        service_token=TEST_TOKEN,
        order_tags_url=str(order_tags.make_url("")),
        driver=DriverProfile(**driver),  # type: ignore[arg-type]
    )


@pytest.fixture
async def emulator_server(
    aiohttp_server: Callable[..., Awaitable[TestServer]], order_tags_server: TestServer
) -> TestServer:
    """The emulator on a real port, driver off: tests change orders by hand."""
    return await aiohttp_server(create_emulator(emulator_settings(order_tags_server)))


@pytest.fixture
async def emulator(
    aiohttp_client: Callable[..., Awaitable[TestClient]], emulator_server: TestServer
) -> TestClient:
    """A client of `emulator_server`: its control API and its upstreams (tests/emulator_api)."""
    return await aiohttp_client(emulator_server)


@pytest.fixture
def upstream_received(
    emulator_server: TestServer, monkeypatch: pytest.MonkeyPatch
) -> dict[str, asyncio.Event]:
    """Per emulator endpoint ("totw", "source:taxi", ...): an event set as soon as it holds a
    request, the moment to act on a call in flight (change the order under it, stop the
    service, send the next poll) without guessing with a sleep."""
    received: dict[str, asyncio.Event] = collections.defaultdict(asyncio.Event)
    stats = emulator_server.app[STATS]
    record_call = stats.record_call

    def record_and_tell(endpoint: str, headers: Any, body: Any) -> None:
        record_call(endpoint, headers, body)
        received[endpoint].set()

    monkeypatch.setattr(stats, "record_call", record_and_tell)
    return received


@pytest.fixture
def totw_received(upstream_received: dict[str, asyncio.Event]) -> asyncio.Event:
    return upstream_received["totw"]


@pytest.fixture
def order_core_received(upstream_received: dict[str, asyncio.Event]) -> asyncio.Event:
    """The order core (the fast_info part's own upstream) holds a request."""
    return upstream_received["part:order_core"]

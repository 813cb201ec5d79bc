"""The access log costs what it is worth: every error and every slow request is written, and a
share (LOG_ACCESS_SAMPLE) of the rest; a held waiting poll is not slow, it waits by design."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from shared.config import ServiceSettings
from shared.errors import BadRequest
from shared.logs import AccessLog
from shared.web import create_base_app


def test_errors_are_always_written():
    access = AccessLog(sample=0.0)
    assert access.writes(400, 0.001, None)
    assert access.writes(503, 0.001, None)


def test_a_slow_request_is_written_but_a_held_waiting_poll_is_not_slow():
    access = AccessLog(sample=0.0, slow_s=1.0)
    assert access.writes(200, 1.5, None)
    assert access.writes(200, 1.5, "news")  # answered at once, and it took long: slow
    assert not access.writes(200, 20.0, "timeout")
    assert not access.writes(200, 3.0, "wakeup")
    # held, then answered as Redis was lost: one line each would be a burst of thousands
    assert not access.writes(200, 12.0, "unavailable")


def test_a_share_of_the_rest_is_written():
    access = AccessLog(sample=0.1, rng=random.Random(4))
    written = sum(access.writes(200, 0.001, None) for _ in range(10_000))
    assert 800 <= written <= 1200
    assert not any(AccessLog(sample=0.0).writes(200, 0.001, None) for _ in range(1000))
    assert all(AccessLog(sample=1.0).writes(200, 0.001, None) for _ in range(1000))


async def test_a_service_writes_its_errors_and_not_its_plain_answers_at_sample_zero(
    aiohttp_client: Callable[..., Awaitable[TestClient]], caplog: pytest.LogCaptureFixture
):
    app = create_base_app("test", ServiceSettings(port=0, log_access_sample=0.0))

    async def refused(request: web.Request) -> web.Response:
        raise BadRequest("no")

    app.router.add_post("/refused", refused)
    client = await aiohttp_client(app)
    with caplog.at_level(logging.INFO, logger="mlutp.http"):
        for _ in range(5):
            assert (await client.get("/ping")).status == 200
        assert (await client.post("/refused")).status == 400
    written = [r for r in caplog.records if r.getMessage() == "request"]
    assert [(r.path, r.status) for r in written] == [("/refused", 400)]  # type: ignore[attr-defined]

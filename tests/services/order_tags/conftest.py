from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestClient

from services.order_tags.app import create_app
from services.order_tags.config import OrderTagsSettings
from shared.config import RedisSettings
from tests.conftest import TEST_TOKEN

AUTH = {"Authorization": f"Bearer {TEST_TOKEN}"}


def order_tags_settings(redis_settings: RedisSettings) -> OrderTagsSettings:
    return OrderTagsSettings(port=0, service_token=TEST_TOKEN, redis=redis_settings)


@pytest.fixture
async def tags_client(
    aiohttp_client: Callable[..., Awaitable[TestClient]], redis_settings: RedisSettings
) -> TestClient:
    return await aiohttp_client(create_app(order_tags_settings(redis_settings)))

"""Every service's app, built with test settings, for checks over all of them."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from aiohttp.web_runner import BaseRunner
from pydantic_settings import BaseSettings

from demo.config import DemoSettings
from emulator.app import create_app as create_emulator
from emulator.config import EmulatorSettings
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.config import RedisSettings
from shared.runner import ServiceRunner


def all_apps(redis: RedisSettings | None = None) -> list[tuple[str, web.Application]]:
    redis = redis or RedisSettings(url="redis://127.0.0.1:1/0")
    return [
        ("order_tags", create_order_tags(OrderTagsSettings(service_token="t", redis=redis))),
        ("emulator", create_emulator(EmulatorSettings(service_token="t"))),
        ("orders_state", create_orders_state(OrdersStateSettings(service_token="t"))),
        ("launch", create_launch(LaunchSettings(service_token="t"))),
    ]


SETTINGS_CLASSES: dict[str, type[BaseSettings]] = {
    "order_tags": OrderTagsSettings,
    "emulator": EmulatorSettings,
    "orders_state": OrdersStateSettings,
    "launch": LaunchSettings,
    "demo": DemoSettings,
}


class ServiceTestServer(TestServer):
    """A TestServer on the services' own runner (shared.runner.ServiceRunner), so that what
    aiohttp answers before a handler runs is what production answers."""

    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        return ServiceRunner(self.app, **kwargs)

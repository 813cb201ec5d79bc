"""Every service's app, built with test settings, for checks over all of them."""

from __future__ import annotations

from aiohttp import web
from pydantic_settings import BaseSettings

from emulator.app import create_app as create_emulator
from emulator.config import EmulatorSettings
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.config import RedisSettings


def all_apps(
    redis: RedisSettings | None = None, token: str = "t"
) -> list[tuple[str, web.Application]]:
    redis = redis or RedisSettings(url="redis://127.0.0.1:1/0")
    return [
        ("order_tags", create_order_tags(OrderTagsSettings(service_token=token, redis=redis))),
        ("emulator", create_emulator(EmulatorSettings(service_token=token))),
        ("orders_state", create_orders_state(OrdersStateSettings(service_token=token))),
        ("launch", create_launch(LaunchSettings(service_token=token))),
    ]


SETTINGS_CLASSES: dict[str, type[BaseSettings]] = {
    "order_tags": OrderTagsSettings,
    "emulator": EmulatorSettings,
    "orders_state": OrdersStateSettings,
    "launch": LaunchSettings,
}

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.bff.config import BffSettings
from shared.config import DEFAULT_PORTS


class OrdersStateSettings(BffSettings):
    model_config = SettingsConfigDict(env_prefix="ORDERS_STATE_")

    port: int = DEFAULT_PORTS["orders_state"]

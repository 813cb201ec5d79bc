from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.bff.config import BffSettings
from shared.config import DEFAULT_PORTS, variable


class LaunchSettings(BffSettings):
    model_config = SettingsConfigDict(env_prefix="LAUNCH_")

    port: int = variable(DEFAULT_PORTS["launch"])

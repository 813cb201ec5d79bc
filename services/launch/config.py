from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.bff.config import BffSettings
from shared.config import DEFAULT_PORTS


class LaunchSettings(BffSettings):
    model_config = SettingsConfigDict(env_prefix="LAUNCH_")

    port: int = DEFAULT_PORTS["launch"]

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.config import DEFAULT_ORDER_TAGS_URL, DEFAULT_PORTS, ServiceSettings
from shared.policy import DEFAULT_POLICY_PATH


class DriverProfile(BaseSettings):
    """The default change profile: how a running stack's orders live (minutes, seconds)."""

    model_config = SettingsConfigDict(env_prefix="EMULATOR_DRIVER_", extra="ignore", frozen=True)

    enabled: bool = False
    tick_s: float = Field(1.0, gt=0)
    # >1 makes everything happen that many times faster (demos)
    time_scale: float = Field(1.0, gt=0)
    # users the driver keeps with one active order each, taking turns between services
    population: int = Field(0, ge=0)
    taxi_status_minutes: dict[str, float] = {
        "searching": 1,
        "driving": 5,
        "waiting": 2,
        "transporting": 7,
    }
    place_status_minutes: dict[str, float] = {
        "created": 2,
        "cooking": 12,
        "assembling": 8,
        "delivering": 15,
    }
    fast_change_every_s: float = Field(60.0, gt=0)
    rarely_changed_per_order: float = Field(1.0, ge=0)
    chat_messages_per_order: float = Field(2.0, ge=0)
    driver_move_every_s: float = Field(2.0, gt=0)
    # a finished trip stays listed, awaiting its rating, until the user rates it this late
    rate_after_s: float = Field(30.0, ge=0)


class EmulatorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="EMULATOR_")

    port: int = DEFAULT_PORTS["emulator"]
    order_tags_url: str = Field(
        DEFAULT_ORDER_TAGS_URL, validation_alias=AliasChoices("ORDER_TAGS_URL", "order_tags_url")
    )
    service_token: SecretStr = Field(
        validation_alias=AliasChoices("MLUTP_SERVICE_TOKEN", "service_token"), min_length=1
    )
    order_tags_deadline_s: float = Field(1.0, gt=0)
    policy_path: Path = Field(
        DEFAULT_POLICY_PATH, validation_alias=AliasChoices("MLUTP_POLICY_PATH", "policy_path")
    )
    driver: DriverProfile = Field(default_factory=DriverProfile)

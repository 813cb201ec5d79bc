from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.config import (
    DEFAULT_ORDER_TAGS_URL,
    DEFAULT_PORTS,
    ServiceSettings,
    Settings,
    variable,
)
from shared.policy import DEFAULT_POLICY_PATH
from shared.tag_outbox import TagWriterSettings

# the emulator's order_tags calls: it is the writer a feature service would be, on the same
# machine as order_tags in every stack it runs in
ORDER_TAGS_DEADLINE_S = 1.0


class DriverProfile(Settings):
    """The default change profile: how a running stack's orders live (minutes, seconds).
    Its figures are the ones docs/capacity.md and docs/loadtest-results.md were measured
    with; a load test changes them in Python (devtools/loadtest)."""

    model_config = SettingsConfigDict(env_prefix="EMULATOR_DRIVER_")

    enabled: bool = variable(False)
    tick_s: float = Field(1.0, gt=0)
    # >1 makes everything happen that many times faster (demos)
    time_scale: float = variable(1.0, gt=0)
    # users the driver keeps with one active order each, taking turns between services
    population: int = variable(0, ge=0)
    taxi_status_minutes: dict[str, float] = Field(
        default_factory=lambda: {
            "searching": 1.0,
            "driving": 5.0,
            "waiting": 2.0,
            "transporting": 7.0,
        }
    )
    place_status_minutes: dict[str, float] = Field(
        default_factory=lambda: {
            "created": 2.0,
            "cooking": 12.0,
            "assembling": 8.0,
            "delivering": 15.0,
        }
    )
    fast_change_every_s: float = Field(60.0, gt=0)
    rarely_changed_per_order: float = Field(1.0, ge=0)
    chat_messages_per_order: float = Field(2.0, ge=0)
    driver_move_every_s: float = Field(2.0, gt=0)
    # a finished trip stays listed, awaiting its rating, until the user rates it this late
    rate_after_s: float = Field(30.0, ge=0)


class EmulatorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="EMULATOR_")

    port: int = variable(DEFAULT_PORTS["emulator"])
    order_tags_url: str = variable(DEFAULT_ORDER_TAGS_URL, env="ORDER_TAGS_URL")
    service_token: SecretStr = variable(env="MLUTP_SERVICE_TOKEN", min_length=1)
    order_tags_deadline_s: float = Field(ORDER_TAGS_DEADLINE_S, gt=0)
    policy_path: Path = variable(DEFAULT_POLICY_PATH, env="MLUTP_POLICY_PATH")
    driver: DriverProfile = Field(default_factory=DriverProfile)
    # how the feature services and order sources retry a tag write the store did not take
    tag_writer: TagWriterSettings = Field(default_factory=TagWriterSettings)

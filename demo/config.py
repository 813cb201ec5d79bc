from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from shared.config import (
    DEFAULT_EMULATOR_URL,
    DEFAULT_LAUNCH_URL,
    DEFAULT_ORDERS_STATE_URL,
    DEFAULT_PORTS,
    ServiceSettings,
)


class DemoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="DEMO_")

    port: int = DEFAULT_PORTS["demo"]
    launch_url: str = Field(
        DEFAULT_LAUNCH_URL, validation_alias=AliasChoices("LAUNCH_URL", "launch_url")
    )
    orders_state_url: str = Field(
        DEFAULT_ORDERS_STATE_URL,
        validation_alias=AliasChoices("ORDERS_STATE_URL", "orders_state_url"),
    )
    emulator_url: str = Field(
        DEFAULT_EMULATOR_URL, validation_alias=AliasChoices("EMULATOR_URL", "emulator_url")
    )
    # the page acts for this one user; the demo server is its API gateway and says who it is
    user_id: str = Field("demo-user", pattern=r"^[\x21-\x7e]{1,128}$")
    # a waiting poll is held up to 25 s plus its random extra: the proxy waits longer
    proxy_timeout_s: float = Field(40.0, gt=0)
    # the "tag cache down" switch locks the stack's Redis (a password, every other connection
    # closed): only for a Redis the stack started itself, never one it was given
    redis_url: str | None = Field(None, validation_alias=AliasChoices("REDIS_URL", "redis_url"))
    tag_cache_switch: bool = False
    # the emulator's fault switches (food source down, totw errors) act on every user of the
    # stack: only for a stack `mlutp run` started for the demo
    fault_switches: bool = False

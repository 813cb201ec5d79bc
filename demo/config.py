from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.config import (
    DEFAULT_EMULATOR_URL,
    DEFAULT_LAUNCH_URL,
    DEFAULT_ORDERS_STATE_URL,
    DEFAULT_PORTS,
    ServiceSettings,
    variable,
)

# a waiting poll is held up to 25 s plus its random extra: the proxy waits longer
PROXY_TIMEOUT_S = 40.0


class DemoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="DEMO_")

    port: int = variable(DEFAULT_PORTS["demo"])
    launch_url: str = variable(DEFAULT_LAUNCH_URL, env="LAUNCH_URL")
    orders_state_url: str = variable(DEFAULT_ORDERS_STATE_URL, env="ORDERS_STATE_URL")
    emulator_url: str = variable(DEFAULT_EMULATOR_URL, env="EMULATOR_URL")
    # the page acts for this one user; the demo server is its API gateway and says who it is
    user_id: str = variable("demo-user", pattern=r"^[\x21-\x7e]{1,128}$")
    proxy_timeout_s: float = Field(PROXY_TIMEOUT_S, gt=0)
    # the "tag cache down" switch locks the stack's Redis (a password, every other connection
    # closed): only for a Redis the stack started itself, never one it was given
    redis_url: str | None = variable(None, env="REDIS_URL")
    tag_cache_switch: bool = variable(False)
    # the emulator's fault switches (food source down, totw errors) act on every user of the
    # stack: only for a stack `mlutp run` started for the demo
    fault_switches: bool = variable(False)

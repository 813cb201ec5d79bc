from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.config import DEFAULT_PORTS, RedisSettings, ServiceSettings, variable


class OrderTagsSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ORDER_TAGS_")

    port: int = variable(DEFAULT_PORTS["order_tags"])
    # no default: a service started alone refuses to start without a token
    service_token: SecretStr = variable(env="MLUTP_SERVICE_TOKEN", min_length=1)
    redis: RedisSettings = Field(default_factory=RedisSettings)

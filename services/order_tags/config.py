from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.config import DEFAULT_PORTS, RedisSettings, ServiceSettings


class OrderTagsSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ORDER_TAGS_")

    port: int = DEFAULT_PORTS["order_tags"]
    # no default: a service started alone refuses to start without a token
    service_token: SecretStr = Field(
        validation_alias=AliasChoices("MLUTP_SERVICE_TOKEN", "service_token"), min_length=1
    )
    redis: RedisSettings = Field(default_factory=RedisSettings)

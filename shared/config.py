"""Settings bases shared by every service. Each service subclasses these with its env prefix.

An operator sets a few variables (docs/configuration.md): addresses, the service token,
Redis and the deadlines that depend on their network, capacity bounds, logs. Every such field
is declared with `variable()`, and only those are read from the environment. Every other
setting is a field too, so that tests and benchmarks build a settings object with the values
they measure (`ProtocolSettings(min_ttl_s=0.5)`), but its default is a named constant saying
why it has that value, and no variable reaches it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import AliasChoices, Field
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

DEFAULT_PORTS = {
    "launch": 8101,
    "orders_state": 8102,
    "order_tags": 8103,
    "emulator": 8110,
    "demo": 8120,
}

DEFAULT_EMULATOR_URL = f"http://127.0.0.1:{DEFAULT_PORTS['emulator']}"
DEFAULT_ORDER_TAGS_URL = f"http://127.0.0.1:{DEFAULT_PORTS['order_tags']}"
DEFAULT_LAUNCH_URL = f"http://127.0.0.1:{DEFAULT_PORTS['launch']}"
DEFAULT_ORDERS_STATE_URL = f"http://127.0.0.1:{DEFAULT_PORTS['orders_state']}"

S = TypeVar("S", bound=BaseSettings)

# the marker of a field read from the environment (json_schema_extra)
_OPERATOR = "operator_variable"


def variable(default: Any = ..., *, env: str | None = None, **constraints: Any) -> Any:
    """A field an operator sets: read from the environment variable `env` (without one, the
    class's prefix and the field's name: ORDERS_STATE_PORT)."""
    if env is not None:
        constraints["validation_alias"] = AliasChoices(env, env.lower())
    return Field(default, json_schema_extra={_OPERATOR: True}, **constraints)


def is_variable(field: FieldInfo) -> bool:
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get(_OPERATOR) is True


class _OperatorVariables(EnvSettingsSource):
    """The environment, for the fields declared with `variable()` only: no other field, and
    no nested settings object as a JSON variable, is read from it."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if not is_variable(field):
            return None, field_name, False
        return super().get_field_value(field, field_name)


class Settings(BaseSettings):
    """Settings whose `variable()` fields, and only those, come from the environment."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _OperatorVariables(settings_cls))


def operator_variables(settings_class: type[BaseSettings]) -> Iterator[tuple[str, FieldInfo]]:
    """Every environment variable a settings class reads, nested settings included, with its
    field (docs/configuration.md lists them; tests count them)."""
    prefix = settings_class.model_config.get("env_prefix", "")
    for name, field in settings_class.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseSettings):
            yield from operator_variables(annotation)
        elif is_variable(field):
            alias = field.validation_alias
            env = alias.choices[0] if isinstance(alias, AliasChoices) else f"{prefix}{name}"
            yield str(env).upper(), field


# -- HTTP serving: the same for every service, none of it depends on the operator's network
# the request body limit (413 above): room for the largest valid poll, 20 known orders
# with 2 KB of their own fields each (40 KB) and their tags
MAX_BODY_BYTES = 64 * 1024
# in-flight requests get this long after SIGTERM: a poll's deadlines are far shorter, and
# the manifests' grace periods are this plus the balancer's preStop drain
SHUTDOWN_TIMEOUT_S = 10.0
# a request (headers and body) must arrive whole this soon after its first byte, or its
# connection is closed: a slow client holds no memory for long (benchmarks/slow_clients.py)
REQUEST_READ_TIMEOUT_S = 5.0
# an idle keep-alive connection is closed after this long: above the balancer's own idle
# timeout (deploy/haproxy), so the balancer, not the service, closes an idle connection
KEEPALIVE_TIMEOUT_S = 30.0
# connections the kernel holds before the process accepts them (capped by
# net.core.somaxconn): aiohttp's 128 overflows when a fleet reconnects at once, and an
# overflowing queue drops the handshake's last packet, so a client that thinks it is
# connected waits for TCP's retransmits: seconds, not milliseconds
LISTEN_BACKLOG = 4096
# the share of plain successful requests the access log writes (errors and slow requests
# are always written): a line for every poll costs each request CPU at INFO, the sample
# nothing measurable (docs/capacity.md: The access log)
LOG_ACCESS_SAMPLE = 0.01


class ServiceSettings(Settings):
    """What every HTTP service has: where it listens, its body limit, logs and shutdown."""

    host: str = variable("127.0.0.1")
    port: int = variable()
    log_level: str = variable("INFO", env="LOG_LEVEL")
    log_access_sample: float = variable(LOG_ACCESS_SAMPLE, env="LOG_ACCESS_SAMPLE", ge=0, le=1)
    # logs are JSON lines, what a log collector reads (False: plain text)
    log_json: bool = True
    max_body_bytes: int = Field(MAX_BODY_BYTES, gt=0)
    shutdown_timeout_s: float = Field(SHUTDOWN_TIMEOUT_S, ge=0)
    # 0: no limit
    request_read_timeout_s: float = Field(REQUEST_READ_TIMEOUT_S, ge=0)
    keepalive_timeout_s: float = Field(KEEPALIVE_TIMEOUT_S, gt=0)
    listen_backlog: int = Field(LISTEN_BACKLOG, gt=0)


# -- Redis
# a socket's connect and read timeouts: twice order_tags' command deadline, so that
# deadline ends a slow call first and the socket timeout only catches a dead connection (the
# pub/sub connections of waiting polls have no other)
REDIS_SOCKET_TIMEOUT_S = 0.2
# an order's tag hash lives a day after its last write: longer than any order's life
# (a taxi order's is about 15 min, a food one's about 40), so only abandoned ones expire
REDIS_KEY_TTL_S = 24 * 3600


class RedisSettings(Settings):
    """How to reach Redis. No URL and no cluster nodes means: start an embedded redis-server."""

    model_config = SettingsConfigDict(env_prefix="REDIS_")

    url: str | None = variable(None)
    # "host:port,host:port": Redis Cluster startup nodes
    cluster_nodes: str | None = variable(None)
    # a hard deadline per call: a blackholed Redis must not hang a request
    command_deadline_s: float = variable(0.1, gt=0)
    # order_tags sends a Redis call with no answer after this long once more, on another
    # connection (up to three more, this far apart, inside the deadline): a lost packet then
    # costs this, not TCP's 200 ms retransmit, which no deadline of a poll allows. Well above
    # a healthy answer's tail (docs/capacity.md: Where the code's numbers come from); on a
    # link with a longer round trip, a few of its round trips. 0: off
    # (services/order_tags/hedging.py)
    hedge_after_s: float = variable(0.01, ge=0)
    socket_timeout_s: float = Field(REDIS_SOCKET_TIMEOUT_S, gt=0)
    connect_timeout_s: float = Field(REDIS_SOCKET_TIMEOUT_S, gt=0)
    key_ttl_s: int = Field(REDIS_KEY_TTL_S, gt=0)


def with_overrides(settings_class: type[S], overrides: Mapping[str, Any]) -> S:
    """The settings from the environment with `overrides` on top, nested ones too (a nested
    settings object is made from its own variables and its part of the overrides): how a
    test, a benchmark or a dev tool sets a number no variable reaches (devtools/serve.py)."""
    values: dict[str, Any] = {}
    for name, value in overrides.items():
        field = settings_class.model_fields.get(name)
        nested = field.annotation if field is not None else None
        if (
            isinstance(value, Mapping)
            and isinstance(nested, type)
            and issubclass(nested, BaseSettings)
        ):
            value = with_overrides(nested, value)
        values[name] = value
    return settings_class(**values)

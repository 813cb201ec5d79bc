"""Settings bases shared by every service. Each service subclasses these with its env prefix."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

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


class ServiceSettings(BaseSettings):
    """What every HTTP service has: where it listens, its body limit, logs and shutdown."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    host: str = "127.0.0.1"
    port: int
    max_body_bytes: int = Field(64 * 1024, gt=0)
    log_level: str = Field("INFO", validation_alias=AliasChoices("LOG_LEVEL", "log_level"))
    log_json: bool = Field(True, validation_alias=AliasChoices("LOG_JSON", "log_json"))
    # the share of plain successful requests the access log writes (errors and slow requests
    # are always written): a line for every poll cost 40-50 µs a request per process at INFO
    log_access_sample: float = Field(
        0.01, ge=0, le=1, validation_alias=AliasChoices("LOG_ACCESS_SAMPLE", "log_access_sample")
    )
    # in-flight requests get this long to finish after SIGTERM
    shutdown_timeout_s: float = Field(10.0, ge=0)
    # a request (headers and body) must arrive whole this soon after its first byte, or its
    # connection is closed: a slow client holds no memory for long. 0: no limit
    request_read_timeout_s: float = Field(5.0, ge=0)
    # an idle keep-alive connection is closed after this long
    keepalive_timeout_s: float = Field(30.0, gt=0)
    # connections the kernel holds before the process accepts them (capped by
    # net.core.somaxconn): aiohttp's 128 overflows when a fleet reconnects at once, and an
    # overflowing queue drops the handshake's last packet, so a client that thinks it is
    # connected waits for TCP's retransmits: seconds, not milliseconds
    listen_backlog: int = Field(4096, gt=0)


class RedisSettings(BaseSettings):
    """How to reach Redis. No URL and no cluster nodes means: start an embedded redis-server."""

    model_config = SettingsConfigDict(
        env_prefix="REDIS_", extra="ignore", populate_by_name=True, frozen=True
    )

    url: str | None = None
    # "host:port,host:port": Redis Cluster startup nodes
    cluster_nodes: str | None = None
    socket_timeout_s: float = Field(0.2, gt=0)
    connect_timeout_s: float = Field(0.2, gt=0)
    # a hard deadline per call: a blackholed Redis must not hang a request
    command_deadline_s: float = Field(0.1, gt=0)
    # order_tags sends a Redis call with no answer after this long once more, on another
    # connection (up to three more, this far apart, inside the deadline): a lost packet then
    # costs this, not TCP's 200 ms retransmit, which no deadline of a poll allows. Well above
    # a healthy answer (p99 1 ms, p99.9 4 ms here); on a link with a longer round trip, a few
    # of its round trips. 0: off (services/order_tags/hedging.py)
    hedge_after_s: float = Field(0.01, ge=0)
    key_ttl_s: int = Field(24 * 3600, gt=0)

"""orders_state's settings: the client-facing services' (services/bff/config.py), and the
waiting polls'. As there, each number has one home: a number of the waiting polls' config
dataclasses (shared.protocol.waiting's WaitingConfig and WakeupTimings) is their own default,
with its reason beside it, which the setting reads. These settings build nothing:
services/orders_state/waiting/setup.py maps them to those objects, for the service and the
simulation alike."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from services.bff.config import BffSettings
from shared.config import DEFAULT_PORTS, RedisSettings, variable
from shared.protocol.waiting import WaitingConfig, WakeupTimings


class RequestDigestSettings(BaseModel):
    """The digest request's store (services/orders_state/kept_requests.py, docs/protocol.md:
    The digest request; 0 entries: every digest is unknown, a client sends every body in
    full)."""

    model_config = ConfigDict(frozen=True)

    # a client's digest only ever names the last body it sent, so a user needs one kept body
    # per device polling this process: a phone, a tablet, a browser tab or two. Past it the
    # user's least recently used body goes; that device's next digest is one round trip more
    per_user: int = Field(4, ge=1)
    # in all: twice the waiting polls one process holds (MLUTP_MAX_WAITING's default), whose
    # clients each repeat their body right after every answer, with room for the clients
    # polling at an interval beside them. A body dropped costs its client a round trip, never
    # an answer
    max_entries: int = Field(20_000, ge=0)
    # and by the bodies' bytes as decoded (up to 64 KiB each), so that a fleet of large bodies
    # (many known orders, long echo fields) is bounded as well as the count: the parsed
    # objects take a few times these bytes
    max_bytes: int = Field(16 * 2**20, ge=0)


class WaitingSettings(BaseModel):
    """The waiting polls' numbers but their cap and the watch cache (an operator's variables);
    shared.protocol.waiting's WaitingConfig and WakeupTimings say why each is what it is."""

    model_config = ConfigDict(frozen=True)

    max_per_user: int = Field(WaitingConfig.max_waiting_per_user, ge=1)
    # > 0: the sweeper sleeps about this long between sweeps (0 spun a core)
    linger_s: float = Field(WakeupTimings.linger_s, gt=0)
    settle_s: float = Field(WaitingConfig.wakeup_settle_s, ge=0, le=5)
    subscribe_deadline_s: float = Field(WaitingConfig.subscribe_deadline_s, gt=0)
    keepalive_s: float = Field(WakeupTimings.keepalive_s, gt=0)
    tags_read_within_s: float = Field(WaitingConfig.tags_read_within_s, gt=0)


class OrdersStateSettings(BffSettings):
    model_config = SettingsConfigDict(env_prefix="ORDERS_STATE_")

    port: int = variable(DEFAULT_PORTS["orders_state"])
    # the Redis order_tags writes to (REDIS_URL or REDIS_CLUSTER_NODES), for the wake-ups of
    # waiting polls; with neither, polls never wait (an embedded Redis of its own would never
    # hear a tag write)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    # waiting polls one process holds at most (each costs memory: docs/capacity.md); past it polls
    # answer at once, interval grown
    max_waiting: int = variable(WaitingConfig.max_waiting, env="MLUTP_MAX_WAITING", ge=0)
    # waiting re-polls held from their client's last look while nothing changed (the watch
    # cache); off, every waiting poll looks
    watch_cache: bool = variable(WaitingConfig.watch_cache)
    waiting: WaitingSettings = WaitingSettings()
    request_digests: RequestDigestSettings = RequestDigestSettings()

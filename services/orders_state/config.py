from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from services.bff.config import BffSettings
from shared.config import DEFAULT_PORTS, RedisSettings


class OrdersStateSettings(BffSettings):
    model_config = SettingsConfigDict(env_prefix="ORDERS_STATE_")

    port: int = DEFAULT_PORTS["orders_state"]
    # the Redis order_tags writes to (REDIS_URL or REDIS_CLUSTER_NODES), for the wake-ups of
    # waiting polls; with neither, polls never wait (an embedded Redis of its own would never
    # hear a tag write)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    # waiting polls one process holds at most; past it polls answer at once, interval grown
    max_waiting: int = Field(
        10_000, ge=0, validation_alias=AliasChoices("MLUTP_MAX_WAITING", "max_waiting")
    )
    # waiting polls of one user held at once (its devices, its app's tabs); past it that
    # user's polls answer at once, interval grown, so one user cannot take the whole cap
    max_waiting_per_user: int = Field(
        8,
        ge=1,
        validation_alias=AliasChoices("MLUTP_MAX_WAITING_PER_USER", "max_waiting_per_user"),
    )
    # a channel no poll waits on stays subscribed this long: the client's next poll waits on
    # the same orders right away
    wakeup_linger_s: float = Field(
        5.0, ge=0, validation_alias=AliasChoices("MLUTP_WAKEUP_LINGER_S", "wakeup_linger_s")
    )
    # after a wake-up a waiting poll looks again this much later, so a burst of writes to one
    # order is one answer and one round of part fetches, not one per write. Off by default:
    # with the emulator's change profile 0.1 s left heavy calls per change as they were
    # (1.11) and cost 0.1 s of freshness (docs/loadtest-results.md)
    wakeup_settle_s: float = Field(
        0.0,
        ge=0,
        le=5,
        validation_alias=AliasChoices("MLUTP_WAKEUP_SETTLE_S", "wakeup_settle_s"),
    )
    # how long a poll may take to subscribe to its orders' channels before it answers at once
    # (`unavailable`) instead of waiting: longer than a Redis command's deadline, since under a
    # burst of polls the confirmations queue behind the process's own event loop
    wakeup_subscribe_deadline_s: float = Field(
        0.5,
        gt=0,
        validation_alias=AliasChoices(
            "MLUTP_WAKEUP_SUBSCRIBE_DEADLINE_S", "wakeup_subscribe_deadline_s"
        ),
    )
    # an idle pub/sub connection sends a PING this often: a Redis `timeout` (common on managed
    # Redis) never closes it, and one that stopped answering is dropped and made again after
    # two periods of silence
    wakeup_keepalive_s: float = Field(
        5.0,
        gt=0,
        validation_alias=AliasChoices("MLUTP_WAKEUP_KEEPALIVE_S", "wakeup_keepalive_s"),
    )

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from services.bff.config import BffSettings
from shared.config import DEFAULT_PORTS, RedisSettings, variable

# -- Waiting polls (services/orders_state/waiting)
# waiting polls of one user held at once (its devices, its app's tabs); past it that user's
# polls answer at once, interval grown, so one user cannot take the whole cap
MAX_WAITING_PER_USER = 8
# a channel no poll waits on stays subscribed this long: the client's next poll (an
# interval later, 5 s for most statuses) waits on the same orders right away
WAKEUP_LINGER_S = 5.0
# after a wake-up a waiting poll looks again this much later, so a burst of writes to one
# order is one answer. Off: with the emulator's change profile a window left heavy calls per
# change as they were and cost its length in freshness (docs/loadtest-results.md: A settle
# window after wake-ups)
WAKEUP_SETTLE_S = 0.0
# how long a poll may take to subscribe to its orders' channels before it answers at once
# (`unavailable`) instead of waiting: longer than a Redis command's deadline, since under a
# burst of polls the confirmations queue behind the process's own event loop
WAKEUP_SUBSCRIBE_DEADLINE_S = 0.5
# an idle pub/sub connection sends a PING this often: a Redis `timeout` (common on managed
# Redis) never closes it, and one that stopped answering is dropped and made again after
# two periods of silence
WAKEUP_KEEPALIVE_S = 5.0
# past the cap of waiting polls, the interval given grows by this much (load shedding)
WAITING_SHED_FACTOR = 2.0
# hold a waiting re-poll from its client's last look while nothing changed (the watch cache,
# docs/protocol.md: Waiting poll): a waiting re-poll with nothing new costs a third of a look
# (docs/capacity.md: The watch cache). A wake-up lost on a live connection (a write made
# around order_tags) is then seen at the next full look, within 0.75 × list_max_age, not one
# wait; a service without list tags is asked on every poll all the same. The default of
# ORDERS_STATE_WATCH_CACHE: off, every waiting poll looks (an operator whose writers bypass
# order_tags may want that)
WATCH_CACHE = True


# -- The digest request (services/orders_state/kept_requests.py, docs/protocol.md: The digest
# request). A client's digest only ever names the last body it sent, so a user needs one kept
# body per device polling this process: a phone, a tablet, a browser tab or two. Past it the
# user's least recently used body goes; that device's next digest is one round trip more
KEPT_REQUESTS_PER_USER = 4
# in all: twice the waiting polls one process holds (MLUTP_MAX_WAITING's default), whose
# clients each repeat their body right after every answer, with room for the clients polling
# at an interval beside them. A body dropped costs its client a round trip, never an answer
KEPT_REQUESTS_MAX_ENTRIES = 20_000
# and by the bodies' bytes as decoded (up to 64 KiB each), so that a fleet of large bodies
# (many known orders, long echo fields) is bounded as well as the count: the parsed objects
# take a few times these bytes
KEPT_REQUESTS_MAX_BYTES = 16 * 2**20


class RequestDigestSettings(BaseModel):
    """The digest request's store (0 entries: every digest is unknown, a client sends every
    body in full)."""

    model_config = ConfigDict(frozen=True)

    per_user: int = Field(KEPT_REQUESTS_PER_USER, ge=1)
    max_entries: int = Field(KEPT_REQUESTS_MAX_ENTRIES, ge=0)
    max_bytes: int = Field(KEPT_REQUESTS_MAX_BYTES, ge=0)


class WaitingSettings(BaseModel):
    """The waiting polls' numbers but their cap (an operator's variable)."""

    model_config = ConfigDict(frozen=True)

    max_per_user: int = Field(MAX_WAITING_PER_USER, ge=1)
    # > 0: the sweeper sleeps about this long between sweeps (0 spun a core)
    linger_s: float = Field(WAKEUP_LINGER_S, gt=0)
    settle_s: float = Field(WAKEUP_SETTLE_S, ge=0, le=5)
    subscribe_deadline_s: float = Field(WAKEUP_SUBSCRIBE_DEADLINE_S, gt=0)
    keepalive_s: float = Field(WAKEUP_KEEPALIVE_S, gt=0)


class OrdersStateSettings(BffSettings):
    model_config = SettingsConfigDict(env_prefix="ORDERS_STATE_")

    port: int = variable(DEFAULT_PORTS["orders_state"])
    # the Redis order_tags writes to (REDIS_URL or REDIS_CLUSTER_NODES), for the wake-ups of
    # waiting polls; with neither, polls never wait (an embedded Redis of its own would never
    # hear a tag write)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    # waiting polls one process holds at most (each costs memory: docs/capacity.md); past it polls
    # answer at once, interval grown
    max_waiting: int = variable(10_000, env="MLUTP_MAX_WAITING", ge=0)
    # waiting re-polls held from their client's last look while nothing changed (the watch
    # cache); off, every waiting poll looks
    watch_cache: bool = variable(WATCH_CACHE)
    waiting: WaitingSettings = WaitingSettings()
    request_digests: RequestDigestSettings = RequestDigestSettings()

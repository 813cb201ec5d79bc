"""The client-facing services' settings (orders_state and launch): where the upstreams are,
and the protocol's numbers.

Each number has one home. An operator's variable (`variable()`) has its default here. A
number of the core's config dataclasses (TagTimings, IntervalRules, EngineConfig, Limits,
admission's BudgetLimit) is their own default, which the setting reads; any other number is
the default of its field here, with its reason beside it. These settings build nothing:
services/bff/resources.py maps them to the core's objects, for the services, the
simulation, the tests and the benchmarks alike."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.config import (
    DEFAULT_EMULATOR_URL,
    DEFAULT_ORDER_TAGS_URL,
    ServiceSettings,
    Settings,
    variable,
)
from shared.policy import DEFAULT_POLICY_PATH
from shared.protocol.admission import BudgetLimit
from shared.protocol.interval import IntervalRules
from shared.protocol.limits import Limits
from shared.protocol.look import EngineConfig
from shared.protocol.need_request import TagTimings

# An upstream not named in the settings is at EMULATOR_URL: an order source at
# /sources/<service>/v1/orders/active, a part upstream at /parts/<name> (the emulator serves
# its part types there too). The legacy /3.0/taxiontheway pass-through goes to the totw part
# type's upstream.
EMULATOR_SOURCE_PATH = "/sources/{service}/v1/orders/active"
EMULATOR_PART_PATH = "/parts/{name}"
LEGACY_PART_TYPE = "totw"


class UpstreamSettings(Settings):
    """Where every upstream is; those not named point at the emulator (EMULATOR_URL).

    - ORDER_SOURCE_URLS: a JSON object service → its order source's URL.
    - PART_UPSTREAM_URLS: a JSON object upstream → URL, where an upstream is a part type
      (totw, eats_full, grocery_full, taxiroute, ...) or the `upstream` a part names in the
      policy (the `slow` part's orderperformerinfo).

    So a new service, or a part with an upstream of its own, is configuration: the policy
    file names it, these name where it lives.
    """

    emulator_url: str = variable(DEFAULT_EMULATOR_URL, env="EMULATOR_URL")
    order_source_urls: dict[str, str] = variable({}, env="ORDER_SOURCE_URLS")
    part_upstream_urls: dict[str, str] = variable({}, env="PART_UPSTREAM_URLS")

    def order_source_url(self, service: str) -> str:
        emulator = self.emulator_url.rstrip("/") + EMULATOR_SOURCE_PATH.format(service=service)
        return self.order_source_urls.get(service, emulator)

    def part_upstream_url(self, name: str) -> str:
        """The URL of a part upstream: a part type's, or one a part names as its own."""
        emulator = self.emulator_url.rstrip("/") + EMULATOR_PART_PATH.format(name=name)
        return self.part_upstream_urls.get(name, emulator)


# -- The shared part cache (services/bff/part_cache.py; docs/protocol.md: Part endpoints)
# part data is kept this long in Redis for every replica (the protocol's `part_cache_ttl`)
PART_CACHE_TTL_S = 60.0
# entries (user × part × question to the upstream) kept per order; a new one past it empties
# the order's hash: one user with two devices asking each of six parts holds 12
PART_CACHE_MAX_ENTRIES = 32
# a part's fields larger than this are not kept (with the entries' cap, an order's bound)
PART_CACHE_MAX_ENTRY_BYTES = 64 * 2**10
# zlib's level for kept parts (0: kept as they are); docs/capacity.md: The shared part cache
PART_CACHE_ZLIB_LEVEL = 1


class IntervalSettings(BaseModel):
    """The polling interval's numbers (the per-status bases are the policy file's)."""

    model_config = ConfigDict(frozen=True)

    default_ms: int = Field(IntervalRules.default_base_ms, gt=0)
    no_orders_ms: int = Field(IntervalRules.no_orders_ms, gt=0)
    min_ms: int = Field(IntervalRules.min_ms, gt=0)
    max_ms: int = Field(IntervalRules.max_ms, gt=0)
    jitter: float = Field(IntervalRules.jitter, ge=0, lt=1)


class TagReadSettings(BaseModel):
    """Joined tag reads (services/bff/tag_reads.py; 0 in flight: no limit; 0 ms: the next
    turn of the loop)."""

    model_config = ConfigDict(frozen=True)

    # the reads of polls reaching them in the same turn of the event loop go to order_tags as
    # one call: it costs the BFF less CPU per poll than one call each (docs/capacity.md: The
    # measured figures)
    join: bool = True
    # joined reads out at once: the reads that come while this many are out go together when
    # one ends, so a read waits at most one call's round trip, and only while order_tags is busy
    in_flight: int = Field(2, ge=0)
    # a part-filled joined read waits this long for more reads: less order_tags CPU per waiting
    # poll, for that much more latency at low load (docs/capacity.md: The measured figures)
    gather_ms: float = Field(2.0, ge=0, le=20)


class PartFetchSettings(BaseModel):
    """Part fetches (services/bff/part_service.py): coalescing, and the two memos' bytes (0:
    that memo off)."""

    model_config = ConfigDict(frozen=True)

    # part requests of one order arriving together share its content tag read and upstream
    # call: an app asking for several parts of an order at once costs the upstream one call
    # (off only to measure a part request's own cost: benchmarks/parts.py)
    coalesce: bool = True
    # the fetches made while the tag cache is down, kept one degraded TTL per process, so that
    # an order costs one upstream call per TTL however its parts are requested. The two memos'
    # bytes are the memory deploy/k8s/base/orders-state.yaml budgets beside the held polls
    degraded_memo_bytes: int = Field(64 * 2**20, ge=0)
    # the fetches made with it up, kept one min TTL: a client sending part requests as fast as
    # it can costs an order one upstream call per min TTL while its content tags stay the same
    recent_memo_bytes: int = Field(16 * 2**20, ge=0)


class PartCacheSettings(BaseModel):
    """The shared part cache in the Redis of REDIS_URL / REDIS_CLUSTER_NODES (off: the memos
    alone, as without a Redis)."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    ttl_s: float = Field(PART_CACHE_TTL_S, gt=0, le=3600)
    max_entries: int = Field(PART_CACHE_MAX_ENTRIES, ge=1)
    max_entry_bytes: int = Field(PART_CACHE_MAX_ENTRY_BYTES, ge=0)
    zlib_level: int = Field(PART_CACHE_ZLIB_LEVEL, ge=0, le=9)


class AdmissionSettings(BaseModel):
    """Admission control's numbers but its ceiling (an operator's variable). The cap of polls
    in progress is the looks the process clears in `budget_ms` at the CPU a look costs
    (measured in windows of `window_s`; `look_cost_ms` until one is), between
    `min_polls_in_flight` and MLUTP_MAX_POLLS_IN_FLIGHT; times a share that shrinks while the
    event loop's smoothed lag (sampled each `sample_s`) stays above `lag_target_ms`.
    docs/capacity.md has the runs these were measured in."""

    model_config = ConfigDict(frozen=True)

    min_polls_in_flight: int = Field(BudgetLimit.min_limit, ge=1)
    budget_ms: float = Field(BudgetLimit.budget_ms, gt=0)
    look_cost_ms: float = Field(BudgetLimit.look_cost_ms, gt=0)
    window_s: float = Field(0.25, gt=0, le=10)
    lag_target_ms: float = Field(BudgetLimit.lag_target_ms, gt=0)
    sample_s: float = Field(0.01, gt=0, le=1)
    # polls in flight past which clients are told to poll less often (or half the cap, if
    # lower), and that factor's cap
    overload_in_flight: int = Field(500, ge=1)
    overload_max_factor: float = Field(4.0, ge=1)
    # a refused poll's Retry-After: this, jittered up to twice it, so refused clients come
    # back spread out
    overload_retry_after_s: int = Field(2, ge=1)


class ProtocolSettings(Settings):
    """The protocol's numbers, shared by orders_state and launch, by concern: the operator's
    deadlines and capacity (MLUTP_*, the only ones read from the environment); the tag cache
    and freshness, and upstream calls; and the groups `tag_reads`, `part_fetches`,
    `part_cache`, `interval` and `admission`. services/bff/resources.py builds the core's
    objects from them."""

    model_config = SettingsConfigDict(env_prefix="MLUTP_")

    policy_path: Path = variable(DEFAULT_POLICY_PATH)

    # deadlines: they depend on the operator's network and upstreams
    source_deadline_s: float = variable(0.25, gt=0)
    tags_deadline_s: float = variable(0.05, gt=0)
    # a part upstream call: each attempt times out after part_timeout_s; with its one retry,
    # an order's fetch ends by part_deadline_s, so a slow order never holds the others longer
    part_timeout_s: float = variable(1.0, gt=0)
    part_deadline_s: float = variable(2.1, gt=0)

    # capacity: the ceiling of the cap of polls in progress in one process (past it a poll
    # is a 503 with Retry-After at once); the cap itself follows the CPU a look costs
    max_polls_in_flight: int = variable(BudgetLimit.max_limit, ge=1)

    # the tag cache and freshness (docs/protocol.md: Tags and need_request, List tags)
    min_ttl_s: float = Field(TagTimings.min_ttl_ms / 1000, ge=0)
    degraded_min_ttl_s: float = Field(TagTimings.degraded_min_ttl_ms / 1000, ge=0)
    # the tag cache's circuit opens after this many failed calls in a row, for this long, then
    # lets one probe through: one lost call does not open it (docs/protocol.md: What a lossy
    # link to Redis costs)
    circuit_failures: int = Field(5, ge=1)
    circuit_open_s: float = Field(2.0, gt=0)
    list_tags: bool = EngineConfig.list_tags
    list_max_age_s: float = Field(EngineConfig.list_max_age_ms / 1000, gt=0, le=300)
    created_grace_s: float = Field(EngineConfig.created_grace_ms / 1000, ge=0, le=300)
    force_per_order_per_minute: int = Field(EngineConfig.force_per_order_per_minute, ge=0)
    # the order-source budget (docs/protocol.md: A fleet): at most this many calls to one
    # source per process in any 5 s; over it the process's last answer of the user (younger
    # than list_max_age) stands in, or the source is unavailable for that poll. 0: none (the
    # protocol's rules alone, which it would override: a contract choice, not a default)
    source_calls_per_window: int = Field(EngineConfig.source_calls_per_window, ge=0)
    last_answers_max_entries: int = Field(EngineConfig.last_answers_max_entries, ge=0)

    tag_reads: TagReadSettings = TagReadSettings()

    # upstream calls (sources and part upstreams): each upstream's circuit opens after this
    # many failed calls in a row (5xx, timeout, connection error), for this long, then lets
    # one probe through
    upstream_circuit_failures: int = Field(10, ge=1)
    upstream_circuit_open_s: float = Field(2.0, gt=0)
    # Envoy's retry budget: retries at most this share of an upstream's calls in the last
    # 10 s, and at least this many, so a failing upstream gets at most 1.2 times its calls,
    # not twice
    retry_budget_ratio: float = Field(0.2, ge=0, le=1)
    retry_budget_min: int = Field(3, ge=0)

    part_fetches: PartFetchSettings = PartFetchSettings()
    part_cache: PartCacheSettings = PartCacheSettings()

    # request limits (docs/protocol.md: Errors and limits)
    max_known_orders: int = Field(Limits.max_known_orders, ge=1)
    max_extra_fields: int = Field(Limits.max_extra_fields, ge=0)
    max_extra_bytes: int = Field(Limits.max_extra_bytes, ge=0)
    max_part_orders: int = Field(3, ge=1)

    interval: IntervalSettings = IntervalSettings()
    admission: AdmissionSettings = AdmissionSettings()


class BffSettings(ServiceSettings):
    order_tags_url: str = variable(DEFAULT_ORDER_TAGS_URL, env="ORDER_TAGS_URL")
    service_token: SecretStr = variable(env="MLUTP_SERVICE_TOKEN", min_length=1)
    upstreams: UpstreamSettings = Field(default_factory=UpstreamSettings)
    protocol: ProtocolSettings = Field(default_factory=ProtocolSettings)

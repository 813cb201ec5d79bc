"""The client-facing services' settings (orders_state and launch): where the upstreams are,
and the protocol's numbers.

Each number has one home. An operator's variable (`variable()`) has its default here; every
other number is a named constant below, grouped by concern, saying why it has its value.
The core's config objects (EngineConfig, Limits, TagTimings, IntervalRules, the part
service's memos, the tag read joining, admission) have no defaults: they are built from a
ProtocolSettings object by its methods, in the services, the simulation, the tests and the
benchmarks alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from services.bff.engine import EngineConfig
from services.bff.fetch_memo import FetchMemo
from services.bff.known_orders import Limits
from shared.config import (
    DEFAULT_EMULATOR_URL,
    DEFAULT_ORDER_TAGS_URL,
    ServiceSettings,
    Settings,
    variable,
)
from shared.http import Protection
from shared.policy import DEFAULT_POLICY_PATH, PollingPolicy
from shared.protocol.admission import BudgetLimit
from shared.protocol.circuit import CircuitBreaker
from shared.protocol.interval import IntervalRules
from shared.protocol.need_request import TagTimings
from shared.protocol.retry_budget import RetryBudget

# Where the emulator serves each upstream: an order source is
# /sources/<service>/v1/orders/active; a part upstream one of these, or the generic
# /parts/<name> (which serves any of them). The legacy /3.0/taxiontheway pass-through goes to
# the totw part type's upstream.
EMULATOR_SOURCE_PATH = "/sources/{service}/v1/orders/active"
EMULATOR_PART_PATHS = {
    "totw": "/3.0/taxiontheway",
    "eats_full": "/eats/v1/orders/details",
    "grocery_full": "/grocery/v1/orders/details",
    "taxiroute": "/taxiroute/v1/route",
}
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
        path = EMULATOR_PART_PATHS.get(name, f"/parts/{name}")
        return self.part_upstream_urls.get(name, self.emulator_url.rstrip("/") + path)


# -- The tag cache and freshness (docs/protocol.md: Tags and need_request, List tags)
# need_request rule 5: a part that changes many times a second is refetched at most this
# often (the protocol's figure)
MIN_TTL_S = 2.0
# need_request rule 3: with the tag cache down, at most one fetch per order and part this
# often (the protocol's figure)
DEGRADED_MIN_TTL_S = 10.0
# the tag cache's circuit opens after this many failed calls in a row, for this long, then
# lets one probe through: one lost call does not open it (docs/protocol.md: What a lossy link
# to Redis costs)
TAG_CACHE_CIRCUIT_FAILURES = 5
TAG_CACHE_CIRCUIT_OPEN_S = 2.0
# a source's kept answer stands for it this long at most (docs/protocol.md: List tags): the
# bound on what a source that forgot to bump its list tag can hide
LIST_MAX_AGE_S = 120.0
# a known order its source does not list yet stays (stale) this long after its tags were
# made (docs/protocol.md: A just-created order the source does not list yet): room for a
# source's replica lag of seconds
CREATED_GRACE_S = 10.0
# force honoured at most this often per order per minute (per fleet); beyond: absent. A
# user pressing refresh is served; an app looping on force costs the source 6 calls a minute
FORCE_PER_ORDER_PER_MINUTE = 6

# -- Joined tag reads (services/bff/tag_reads.py)
# the reads of polls reaching them in the same turn of the event loop go to order_tags as
# one call: it costs the BFF less CPU per poll than one call each (docs/capacity.md: The
# measured figures)
JOIN_TAG_READS = True
# joined reads out at once: the reads that come while this many are out go together when
# one ends, so a read waits at most one call's round trip, and only while order_tags is busy
TAG_READS_IN_FLIGHT = 2
# a part-filled joined read waits this long for more reads: less order_tags CPU per waiting
# poll, for that much more latency at low load (docs/capacity.md: The measured figures)
TAG_READS_GATHER_MS = 2.0

# -- Upstream calls (sources and part upstreams)
# each upstream's circuit opens after this many failed calls in a row (5xx, timeout,
# connection error), for this long, then lets one probe through
UPSTREAM_CIRCUIT_FAILURES = 10
UPSTREAM_CIRCUIT_OPEN_S = 2.0
# Envoy's retry budget: retries at most this share of an upstream's calls in the last 10 s,
# and at least this many, so a failing upstream gets at most 1.2 times its calls, not twice
RETRY_BUDGET_RATIO = 0.2
RETRY_BUDGET_MIN = 3

# -- Part fetches and their memos (services/bff/part_service.py)
# part requests of one order arriving together share its content tag read and upstream
# call: an app asking for several parts of an order at once costs the upstream one call
# (off only to measure a part request's own cost: benchmarks/parts.py)
COALESCE_PART_FETCHES = True
# the fetches made while the tag cache is down, kept one degraded TTL per process, so that
# an order costs one upstream call per TTL however its parts are requested. The two memos'
# bytes are the memory deploy/k8s/base/orders-state.yaml budgets beside the held polls
DEGRADED_MEMO_BYTES = 64 * 2**20
# the fetches made with it up, kept one min TTL: a client sending part requests as fast as
# it can costs an order one upstream call per min TTL while its content tags stay the same
# (0: off)
RECENT_MEMO_BYTES = 16 * 2**20

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

# -- Request limits (docs/protocol.md: Errors and limits)
MAX_KNOWN_ORDERS = 20
MAX_EXTRA_FIELDS = 16
MAX_EXTRA_BYTES = 2048
MAX_PART_ORDERS = 3

# -- The polling interval (docs/protocol.md: Polling interval); per-status bases are policy
INTERVAL_DEFAULT_MS = 5000
INTERVAL_NO_ORDERS_MS = 30_000
INTERVAL_MIN_MS = 1000
INTERVAL_MAX_MS = 60_000
# ±10 %: a fleet of apps started together (a deploy, a reconnect) spreads out
INTERVAL_JITTER = 0.10
# with the tag cache down clients poll half as often (the protocol's figure)
INTERVAL_DEGRADED_FACTOR = 2.0

# -- Admission (services/bff/admission.py): the cap of polls in progress is the looks the
# process clears in ADMISSION_BUDGET_MS at the CPU a look costs (measured in windows of
# ADMISSION_WINDOW_S; ADMISSION_LOOK_COST_MS until one is), between MIN_POLLS_IN_FLIGHT and
# MLUTP_MAX_POLLS_IN_FLIGHT; times a share that shrinks while the event loop's smoothed lag
# (sampled each ADMISSION_SAMPLE_S) stays above ADMISSION_LAG_TARGET_MS. docs/capacity.md
# has the runs these were measured in.
# a quarter of a second of queue: well inside a poll's deadlines and a client's timeout
ADMISSION_BUDGET_MS = 250.0
# a look's CPU until one is measured: between a plain poll's and a re-ask's
# (docs/capacity.md: The measured figures)
ADMISSION_LOOK_COST_MS = 0.5
ADMISSION_WINDOW_S = 0.25
# the cap's floor: a process whose measured look cost is inflated (a noisy neighbour's CPU)
# still admits polls
MIN_POLLS_IN_FLIGHT = 20
# the lag a process under lasting overload settles at: small beside a poll's deadlines
ADMISSION_LAG_TARGET_MS = 10.0
ADMISSION_SAMPLE_S = 0.01
# polls in flight past which clients are told to poll less often (or half the cap, if
# lower), and that factor's cap
OVERLOAD_IN_FLIGHT = 500
OVERLOAD_MAX_FACTOR = 4.0
# a refused poll's Retry-After: this, jittered up to twice it, so refused clients come back
# spread out
OVERLOAD_RETRY_AFTER_S = 2


class IntervalSettings(BaseModel):
    """The polling interval's numbers (the per-status bases are the policy file's)."""

    model_config = ConfigDict(frozen=True)

    default_ms: int = Field(INTERVAL_DEFAULT_MS, gt=0)
    no_orders_ms: int = Field(INTERVAL_NO_ORDERS_MS, gt=0)
    min_ms: int = Field(INTERVAL_MIN_MS, gt=0)
    max_ms: int = Field(INTERVAL_MAX_MS, gt=0)
    jitter: float = Field(INTERVAL_JITTER, ge=0, lt=1)


class TagReadSettings(BaseModel):
    """Joined tag reads (0 in flight: no limit; 0 ms: the next turn of the loop)."""

    model_config = ConfigDict(frozen=True)

    join: bool = JOIN_TAG_READS
    in_flight: int = Field(TAG_READS_IN_FLIGHT, ge=0)
    gather_ms: float = Field(TAG_READS_GATHER_MS, ge=0, le=20)


class PartFetchSettings(BaseModel):
    """Part fetches: coalescing, and the two memos' bytes (0: that memo off)."""

    model_config = ConfigDict(frozen=True)

    coalesce: bool = COALESCE_PART_FETCHES
    degraded_memo_bytes: int = Field(DEGRADED_MEMO_BYTES, ge=0)
    recent_memo_bytes: int = Field(RECENT_MEMO_BYTES, ge=0)


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
    """Admission control's numbers but its ceiling (an operator's variable)."""

    model_config = ConfigDict(frozen=True)

    min_polls_in_flight: int = Field(MIN_POLLS_IN_FLIGHT, ge=1)
    budget_ms: float = Field(ADMISSION_BUDGET_MS, gt=0)
    look_cost_ms: float = Field(ADMISSION_LOOK_COST_MS, gt=0)
    window_s: float = Field(ADMISSION_WINDOW_S, gt=0, le=10)
    lag_target_ms: float = Field(ADMISSION_LAG_TARGET_MS, gt=0)
    sample_s: float = Field(ADMISSION_SAMPLE_S, gt=0, le=1)
    overload_in_flight: int = Field(OVERLOAD_IN_FLIGHT, ge=1)
    overload_max_factor: float = Field(OVERLOAD_MAX_FACTOR, ge=1)
    overload_retry_after_s: int = Field(OVERLOAD_RETRY_AFTER_S, ge=1)


class ProtocolSettings(Settings):
    """The protocol's numbers, shared by orders_state and launch, by concern: the operator's
    deadlines and capacity (MLUTP_*, the only ones read from the environment); the tag cache
    and freshness, and upstream calls; and the groups `tag_reads`, `part_fetches`,
    `part_cache`, `interval` and `admission`. Every default but the operator's is a constant
    above."""

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
    max_polls_in_flight: int = variable(2000, ge=1)

    # the tag cache and freshness
    min_ttl_s: float = Field(MIN_TTL_S, ge=0)
    degraded_min_ttl_s: float = Field(DEGRADED_MIN_TTL_S, ge=0)
    circuit_failures: int = Field(TAG_CACHE_CIRCUIT_FAILURES, ge=1)
    circuit_open_s: float = Field(TAG_CACHE_CIRCUIT_OPEN_S, gt=0)
    # off: every source is asked on every poll (the policy's list_tags per service is the
    # operator's switch; this one measures what list tags save)
    list_tags: bool = True
    list_max_age_s: float = Field(LIST_MAX_AGE_S, gt=0, le=300)
    created_grace_s: float = Field(CREATED_GRACE_S, ge=0, le=300)
    force_per_order_per_minute: int = Field(FORCE_PER_ORDER_PER_MINUTE, ge=0)

    tag_reads: TagReadSettings = TagReadSettings()

    # upstream calls
    upstream_circuit_failures: int = Field(UPSTREAM_CIRCUIT_FAILURES, ge=1)
    upstream_circuit_open_s: float = Field(UPSTREAM_CIRCUIT_OPEN_S, gt=0)
    retry_budget_ratio: float = Field(RETRY_BUDGET_RATIO, ge=0, le=1)
    retry_budget_min: int = Field(RETRY_BUDGET_MIN, ge=0)

    part_fetches: PartFetchSettings = PartFetchSettings()
    part_cache: PartCacheSettings = PartCacheSettings()

    # request limits
    max_known_orders: int = Field(MAX_KNOWN_ORDERS, ge=1)
    max_extra_fields: int = Field(MAX_EXTRA_FIELDS, ge=0)
    max_extra_bytes: int = Field(MAX_EXTRA_BYTES, ge=0)
    max_part_orders: int = Field(MAX_PART_ORDERS, ge=1)

    interval: IntervalSettings = IntervalSettings()
    admission: AdmissionSettings = AdmissionSettings()

    def protection(self, on_event: Callable[[str], None]) -> Protection:
        """A breaker and a retry budget for one upstream."""
        return Protection(
            CircuitBreaker(self.upstream_circuit_failures, self.upstream_circuit_open_s),
            RetryBudget(self.retry_budget_ratio, self.retry_budget_min),
            on_event,
        )

    def tag_cache_breaker(self) -> CircuitBreaker:
        return CircuitBreaker(self.circuit_failures, self.circuit_open_s)

    def timings(self) -> TagTimings:
        return TagTimings(
            min_ttl_ms=int(self.min_ttl_s * 1000),
            degraded_min_ttl_ms=int(self.degraded_min_ttl_s * 1000),
        )

    def engine_config(self, policy: PollingPolicy) -> EngineConfig:
        """The poll engine's config, from these settings: one home for the mapping (the
        services and the simulation build their engines with it)."""
        return EngineConfig(
            timings=self.timings(),
            interval=self.interval_rules(policy),
            force_per_order_per_minute=self.force_per_order_per_minute,
            list_tags=self.list_tags,
            list_max_age_ms=int(self.list_max_age_s * 1000),
            created_grace_ms=int(self.created_grace_s * 1000),
        )

    def interval_rules(self, policy: PollingPolicy | None = None) -> IntervalRules:
        """The per-status bases are policy (the policy file; none without one); the rest are
        numbers here."""
        return IntervalRules(
            status_bases_ms=policy.interval_bases_ms() if policy is not None else {},
            default_base_ms=self.interval.default_ms,
            no_orders_ms=self.interval.no_orders_ms,
            degraded_factor=INTERVAL_DEGRADED_FACTOR,
            jitter=self.interval.jitter,
            min_ms=self.interval.min_ms,
            max_ms=self.interval.max_ms,
        )

    def limits(self) -> Limits:
        """What a poll's known_orders may hold."""
        return Limits(
            max_known_orders=self.max_known_orders,
            max_extra_fields=self.max_extra_fields,
            max_extra_bytes=self.max_extra_bytes,
        )

    def degraded_memo(self) -> FetchMemo:
        return FetchMemo(
            ttl_ms=self.timings().degraded_min_ttl_ms,
            max_bytes=self.part_fetches.degraded_memo_bytes,
        )

    def recent_memo(self) -> FetchMemo:
        return FetchMemo(
            ttl_ms=self.timings().min_ttl_ms, max_bytes=self.part_fetches.recent_memo_bytes
        )

    def part_cache_ttl_ms(self) -> int:
        return int(self.part_cache.ttl_s * 1000)

    def budget_limit(self) -> BudgetLimit:
        """The admission cap's bounds and what moves it."""
        return BudgetLimit(
            min_limit=self.admission.min_polls_in_flight,
            max_limit=self.max_polls_in_flight,
            budget_ms=self.admission.budget_ms,
            look_cost_ms=self.admission.look_cost_ms,
            lag_target_ms=self.admission.lag_target_ms,
        )


class BffSettings(ServiceSettings):
    order_tags_url: str = variable(DEFAULT_ORDER_TAGS_URL, env="ORDER_TAGS_URL")
    service_token: SecretStr = variable(env="MLUTP_SERVICE_TOKEN", min_length=1)
    upstreams: UpstreamSettings = Field(default_factory=UpstreamSettings)
    protocol: ProtocolSettings = Field(default_factory=ProtocolSettings)

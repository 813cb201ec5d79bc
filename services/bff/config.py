from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.bff.engine import EngineConfig
from shared.config import DEFAULT_EMULATOR_URL, DEFAULT_ORDER_TAGS_URL, ServiceSettings
from shared.http import Protection
from shared.policy import DEFAULT_POLICY_PATH, PollingPolicy
from shared.protocol.circuit import CircuitBreaker
from shared.protocol.interval import IntervalRules
from shared.protocol.need_request import TagTimings
from shared.protocol.retry_budget import RetryBudget

# where each named upstream lives on the emulator; any of them can be pointed elsewhere
EMULATOR_PATHS = {
    "taxi_order_source_url": "/sources/taxi/v1/orders/active",
    "eats_order_source_url": "/sources/eats/v1/orders/active",
    "grocery_order_source_url": "/sources/grocery/v1/orders/active",
    "totw_url": "/3.0/taxiontheway",
    "eats_details_url": "/eats/v1/orders/details",
    "grocery_details_url": "/grocery/v1/orders/details",
    "taxiroute_url": "/taxiroute/v1/route",
}
# The part types with an upstream setting of their own name: part_type → the setting. Any
# other upstream a part names (its `upstream`, or an unlisted part type) is
# PART_UPSTREAM_URLS[name] (and the emulator's generic /parts/<name> without it). The legacy
# /3.0/taxiontheway pass-through goes to the totw part type's upstream.
PART_TYPE_UPSTREAMS = {
    "totw": "totw_url",
    "eats_full": "eats_details_url",
    "grocery_full": "grocery_details_url",
    "taxiroute": "taxiroute_url",
}
LEGACY_PART_TYPE = "totw"


class UpstreamSettings(BaseSettings):
    """Where every upstream is; those not set point at the emulator (EMULATOR_URL).

    - The first services' and part types' have a variable each (TOTW_URL,
      TAXI_ORDER_SOURCE_URL, ...).
    - Any service's order source: ORDER_SOURCE_URLS, a JSON object service → URL; without
      one, the emulator's /sources/<service>/v1/orders/active.
    - Any other part upstream (a part's own `upstream` in the policy, or a new part type):
      PART_UPSTREAM_URLS, a JSON object name → URL; without one, the emulator's
      /parts/<name>, which serves any of them generically.

    So a new service, or a part with an upstream of its own, is configuration: the policy
    file names it, these name where it lives.
    """

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    emulator_url: str = DEFAULT_EMULATOR_URL
    taxi_order_source_url: str = ""
    eats_order_source_url: str = ""
    grocery_order_source_url: str = ""
    totw_url: str = ""
    eats_details_url: str = ""
    grocery_details_url: str = ""
    taxiroute_url: str = ""
    order_source_urls: dict[str, str] = {}
    part_upstream_urls: dict[str, str] = {}

    @model_validator(mode="before")
    @classmethod
    def _default_to_emulator(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        base = str(values.get("emulator_url") or DEFAULT_EMULATOR_URL).rstrip("/")
        return {
            **{name: base + path for name, path in EMULATOR_PATHS.items()},
            **{name: value for name, value in values.items() if value},
        }

    def order_source_url(self, service: str) -> str:
        named = f"{service}_order_source_url"
        if named in EMULATOR_PATHS:
            url: str = getattr(self, named)
            return url
        return self.order_source_urls.get(
            service, f"{self.emulator_url.rstrip('/')}/sources/{service}/v1/orders/active"
        )

    def part_upstream_url(self, name: str) -> str:
        """The URL of a part upstream: a part type's, or one a part names as its own."""
        named = PART_TYPE_UPSTREAMS.get(name)
        if named is not None:
            url: str = getattr(self, named)
            return url
        return self.part_upstream_urls.get(name, f"{self.emulator_url.rstrip('/')}/parts/{name}")


class ProtocolSettings(BaseSettings):
    """The protocol's numbers (MLUTP_*), shared by orders_state and launch."""

    model_config = SettingsConfigDict(
        env_prefix="MLUTP_", extra="ignore", frozen=True, populate_by_name=True
    )

    policy_path: Path = DEFAULT_POLICY_PATH
    source_deadline_s: float = Field(0.25, gt=0)
    tags_deadline_s: float = Field(0.05, gt=0)
    # a part upstream call: each attempt times out after part_timeout_s; with its one retry,
    # an order's fetch ends by part_deadline_s, so a slow order never holds the others longer
    part_timeout_s: float = Field(1.0, gt=0)
    part_deadline_s: float = Field(2.1, gt=0)
    # part requests of one order arriving together share its content tag read and upstream call
    coalesce_part_fetches: bool = True
    min_ttl_s: float = Field(2.0, ge=0)
    degraded_min_ttl_s: float = Field(10.0, ge=0)
    # the fetches made while the tag cache is down, kept one degraded TTL per process so
    # that an order costs one upstream call per TTL however its parts are requested
    degraded_memo_bytes: int = Field(64 * 2**20, ge=0)
    # the fetches made with it up, kept one min TTL per process: a client sending part
    # requests as fast as it can costs an order one upstream call per min TTL while its
    # content tags stay the same (0 bytes: off)
    recent_memo_bytes: int = Field(16 * 2**20, ge=0)
    circuit_failures: int = Field(5, ge=1)
    circuit_open_s: float = Field(2.0, gt=0)
    # each upstream (sources, totw, details, taxiroute): its circuit opens after this many
    # failed calls in a row, for this long, then lets one probe through
    upstream_circuit_failures: int = Field(10, ge=1)
    upstream_circuit_open_s: float = Field(2.0, gt=0)
    # retries at most this share of an upstream's calls in the last 10 s (Envoy's budget),
    # and at least retry_budget_min of them
    retry_budget_ratio: float = Field(0.2, ge=0, le=1)
    retry_budget_min: int = Field(3, ge=0)
    max_known_orders: int = Field(20, ge=1)
    max_extra_fields: int = Field(16, ge=0)
    max_extra_bytes: int = Field(2048, ge=0)
    max_part_orders: int = Field(3, ge=1)
    interval_default_ms: int = Field(5000, gt=0)
    interval_no_orders_ms: int = Field(30_000, gt=0)
    interval_min_ms: int = Field(1000, gt=0)
    interval_max_ms: int = Field(60_000, gt=0)
    interval_jitter: float = Field(0.10, ge=0, lt=1)
    # polls in flight past which clients are told to poll less often (or half the cap of
    # polls in progress, if lower)
    overload_in_flight: int = Field(500, ge=1)
    overload_max_factor: float = Field(4.0, ge=1)
    # the cap of polls in progress (past it a poll is a 503 with Retry-After at once) is the
    # looks the process clears in admission_budget_ms, at the CPU a look costs (measured in
    # windows of admission_window_s; admission_look_cost_ms until one is), between these
    # bounds (a floor above the ceiling is the ceiling); times a share that shrinks while the
    # event loop's smoothed lag (sampled each admission_sample_s) stays above
    # admission_lag_target_ms and grows back below it, so a lasting lag settles at the target:
    # lasting overload, where reading and refusing requests take their share of the loop
    max_polls_in_flight: int = Field(2000, ge=1)
    min_polls_in_flight: int = Field(20, ge=1)
    admission_budget_ms: float = Field(250.0, gt=0)
    admission_look_cost_ms: float = Field(0.5, gt=0)
    admission_window_s: float = Field(0.25, gt=0, le=10)
    # the tag reads of polls that reach them in the same turn of the event loop go to
    # order_tags as one call (up to its limits per call); off only to measure what it saves
    join_tag_reads: bool = True
    # joined tag reads out at once: the reads that come while this many are out go together
    # in one call when one ends, or at once when they fill a call (0: no limit)
    tag_reads_in_flight: int = Field(2, ge=0)
    # a part-filled joined read goes out no sooner than this after its first read, so that
    # polls spread in time (waiting polls, whose waits end at random) share calls too
    tag_reads_gather_ms: float = Field(2.0, ge=0, le=20)
    admission_lag_target_ms: float = Field(10.0, gt=0)
    admission_sample_s: float = Field(0.01, gt=0, le=1)
    overload_retry_after_s: int = Field(2, ge=1)
    # force honoured at most this often per order per minute (per process); beyond: absent
    force_per_order_per_minute: int = Field(6, ge=0)
    # off: every source is asked on every poll, whatever the policy's list_tags say (an
    # operator's switch, e.g. while a source is known not to bump its list tags)
    list_tags: bool = True
    # a source's kept answer stands for it this long at most (docs/protocol.md: List tags)
    list_max_age_s: float = Field(120.0, gt=0, le=300)
    # a known order its source does not list yet stays (stale) this long after its tags
    # were made (docs/protocol.md: A just-created order the source does not list yet)
    created_grace_s: float = Field(10.0, ge=0, le=300)

    def protection(self, on_event: Callable[[str], None]) -> Protection:
        """A breaker and a retry budget for one upstream."""
        return Protection(
            CircuitBreaker(self.upstream_circuit_failures, self.upstream_circuit_open_s),
            RetryBudget(self.retry_budget_ratio, self.retry_budget_min),
            on_event,
        )

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

    def interval_rules(self, policy: PollingPolicy) -> IntervalRules:
        """The per-status bases are policy (the policy file); the rest are numbers here."""
        return IntervalRules(
            status_bases_ms=policy.interval_bases_ms(),
            default_base_ms=self.interval_default_ms,
            no_orders_ms=self.interval_no_orders_ms,
            jitter=self.interval_jitter,
            min_ms=self.interval_min_ms,
            max_ms=self.interval_max_ms,
        )


class BffSettings(ServiceSettings):
    order_tags_url: str = Field(
        DEFAULT_ORDER_TAGS_URL, validation_alias=AliasChoices("ORDER_TAGS_URL", "order_tags_url")
    )
    service_token: SecretStr = Field(
        validation_alias=AliasChoices("MLUTP_SERVICE_TOKEN", "service_token"), min_length=1
    )
    upstreams: UpstreamSettings = Field(default_factory=UpstreamSettings)
    protocol: ProtocolSettings = Field(default_factory=ProtocolSettings)

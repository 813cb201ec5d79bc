"""What a load test runs (`LoadtestConfig`) and what one phase measured (`PhaseResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HEAVY_TARGETS = ("totw", "eats_details", "grocery_details")


# the upstreams whose work (emulator/work.py: every field of an order's data they built) is
# compared with legacy's: part upstreams, totw and the details; not the order sources,
# compared with their own steady rate
def priced_target(target: str) -> bool:
    return not target.startswith("source:")


# the taxi `slow` part's own upstream: every legacy totw call asked it once (totw builds its
# document from it), so its bound is the legacy totw calls, window by window
PERFORMER_TARGET = "part:orderperformerinfo"
# every taxi part's own service (the default policy's): each bound, window by window, by the
# legacy totw calls, each of which asked every one of them once
PART_SERVICE_TARGETS = (
    "part:order_core",
    "part:order_settings",
    "part:order_static",
    "part:orderchat",
    PERFORMER_TARGET,
)
# the window in which the bound must hold at every moment
PEAK_WINDOW_S = 5
# changes this close to a phase's end may not be seen before it: left out of freshness
FRESHNESS_CUTOFF_S = 12.0
# the waiting clients' wait (mode mlutp_wait)
WAIT_MS = 25_000


@dataclass
class LoadtestConfig:
    clients: int = 100
    duration_s: float = 60.0
    warmup_s: float = 15.0
    ios_share: float = 0.5
    faults: tuple[str, ...] = ()
    # the modes of the new scheme each fault is run in
    fault_modes: tuple[str, ...] = ("mlutp", "mlutp_wait")
    # run the fault-free waiting-poll phase too
    with_wait: bool = True
    # run the fault-free phase of the new scheme (a run of faults alone, held to legacy's
    # rate, has no use for it)
    with_mlutp: bool = True
    time_scale: float = 1.0
    out_dir: Path = Path("reports/loadtest")
    progress: bool = True
    seed: int = 1
    # orders_state and launch processes; the new scheme's clients take them in turn
    replicas: int = 1
    # > 0: the tags on an embedded Redis Cluster of this many masters instead of one Redis
    redis_cluster: int = 0
    # the share of new orders created "on another device" (or the web): the user's client
    # gets no hint of them and learns of them only from its polls
    created_elsewhere: float = 0.0
    # the clients' starts are spread over this many seconds (at most the warm-up): spread
    # over list_max_age, their kept answers expire at their own moments as a long-running
    # population's do, not in waves a few seconds wide
    start_spread_s: float = 5.0
    # the stack's list_max_age (the BFF's default): where SourceCallCauses tells a re-ask for
    # a kept answer's age from an earlier one
    list_max_age_s: float = 120.0


@dataclass
class PhaseResult:
    name: str
    clients: int
    seconds: float
    active_order_minutes: float
    heavy_calls: int
    heavy_calls_per_order_minute: float
    bytes_per_client_minute: float
    requests: int
    errors: int
    poll_latency_ms: dict[str, float]
    freshness_s: dict[str, float]
    changes_measured: int
    changes_unseen: int
    timeline: list[dict[str, float]] = field(default_factory=list)
    freshness_points: list[tuple[float, float]] = field(default_factory=list)
    # orders/state and launch requests (parts not counted) per client-minute
    polls_per_client_minute: float = 0.0
    # the most heavy calls per order-minute in any 5-s window of the phase
    peak_heavy_calls_per_order_minute: float = 0.0
    # upstream work units (emulator/work.py) per active order-minute, every priced upstream's
    # together, and by upstream; calls of every part upstream (the taxi part services too)
    work_per_order_minute: float = 0.0
    work_per_order_minute_by_upstream: dict[str, float] = field(default_factory=dict)
    part_calls_per_order_minute: float = 0.0
    # totw calls per order-minute, and the most performer-info calls per order-minute in any
    # 5-s window: that upstream's load against what legacy totw polling gave it
    totw_calls_per_order_minute: float = 0.0
    # legacy's totw calls in its worst 5-s window: each asked every taxi part service once
    peak_totw_calls_per_order_minute: float = 0.0
    peak_performer_calls_per_order_minute: float = 0.0
    # the same for the busiest taxi part service in its worst window
    peak_part_service_calls_per_order_minute: float = 0.0
    server_errors: int = 0
    fault: str | None = None
    # seconds from the fault's end to the first second orders_state saw no failure
    recovery_s: float | None = None
    # requests each orders_state replica answered in the measured part (route by route)
    requests_by_replica: list[float] = field(default_factory=list)
    # bytes per client-minute by request path (the bytes to the app, split by kind)
    bytes_per_client_minute_by_path: dict[str, float] = field(default_factory=dict)
    # order source calls (every service's, launch's and polls') per client-minute
    source_calls_per_client_minute: float = 0.0
    # the same by why each was made (measure.SourceCallCauses), per client-minute
    source_calls_per_client_minute_by_cause: dict[str, float] = field(default_factory=dict)
    # of the calls past their kept answer's age: seconds since the previous call (p50, p95,
    # mean), how often an unchanged list is asked again
    past_max_age_gap_s: dict[str, float] = field(default_factory=dict)
    # from an order's creation elsewhere to its client holding it (created_elsewhere > 0)
    created_elsewhere_freshness_s: dict[str, float] = field(default_factory=dict)
    created_elsewhere_measured: int = 0
    # bytes both ways per client-minute as they cross a mobile network behind a gzipping
    # gateway (client.wire_bytes): each of client.transport.WIRE_KINDS, and the sums `raw`
    # (bodies as sent), `gzip` (bodies gzipped) and `gzip_headers` (gzip with both header blocks)
    wire_bytes_per_client_minute: dict[str, float] = field(default_factory=dict)
    # gzip_headers per client-minute by "<path> <status>", the costliest first
    wire_bytes_per_client_minute_by_exchange: dict[str, float] = field(default_factory=dict)
    # how many of each of those exchanges per client-minute
    exchanges_per_client_minute: dict[str, float] = field(default_factory=dict)

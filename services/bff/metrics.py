from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from shared.metrics import LATENCY_BUCKETS

UPSTREAM_EVENTS = ("retry", "retry_over_budget", "circuit_open")


class BffMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.sources = Counter(
            "mlutp_order_source_calls",
            "Order source answers by outcome: ok and unavailable (asked), kept (a kept answer "
            "stood for the source), coalesced_ok and coalesced_unavailable (shared a call of "
            "the same user in flight), kept_older (a kept answer older than the client's echo, "
            "set aside), over_budget_last and over_budget_unavailable (a call over the "
            "order-source budget, not made: the user's last answer stood in, or none did)",
            ["service", "outcome"],
            registry=registry,
        )
        self.ignored_service_names = Counter(
            "mlutp_ignored_service_names",
            "Names in supported_services not considered, by why: malformed (not a service "
            "name) or past_limit (after the first 64)",
            ["reason"],
            registry=registry,
        )
        self.tag_cache = Counter(
            "mlutp_tag_cache_calls",
            "Tag cache calls by outcome (ok, unavailable, circuit_open, rejected, create_failed)",
            ["outcome"],
            registry=registry,
        )
        self.circuit_open = Gauge(
            "mlutp_tag_cache_circuit_open",
            "1 while the tag cache circuit is open",
            registry=registry,
        )
        self.part_degraded_memo = Counter(
            "mlutp_part_degraded_memo",
            "Part fetches answered from the fetch of the same order made while the tag cache "
            "was down, less than a degraded TTL before (no upstream call)",
            ["service", "part"],
            registry=registry,
        )
        self.part_recent = Counter(
            "mlutp_part_recent_memo",
            "Part fetches answered from a fetch of the same order less than a min TTL before, "
            "its content tags unchanged since (no upstream call)",
            ["service", "part"],
            registry=registry,
        )
        self.part_cache = Counter(
            "mlutp_part_cache",
            "The shared part cache in Redis, per part request's order: hit (answered with no "
            "upstream call), miss (Redis failing included: the upstream or the memo "
            "answered), stored",
            ["service", "part", "outcome"],
            registry=registry,
        )
        self.part_cache_errors = Counter(
            "mlutp_part_cache_errors",
            "Calls to the shared part cache that failed or passed their deadline (each a miss)",
            ["operation"],
            registry=registry,
        )
        # the poll's own work, a waiting poll's held time left out: what the protocol's "critical
        # data comes back quickly" is measured by (http_request_duration_seconds of
        # orders/state holds the waits too)
        self.poll_look = Histogram(
            "mlutp_poll_look_seconds",
            "One look of a poll: the order sources, the tag cache and the decisions (a waiting "
            "poll looks once, then once per wake-up)",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_calls = Counter(
            "mlutp_upstream_calls",
            "Calls made to each upstream (source:<service>, totw, eats_full, ...), retries not "
            "counted: the heavy ones (totw, details) are what the legacy polling is held to",
            ["upstream"],
            registry=registry,
        )
        self.upstream_events = Counter(
            "mlutp_upstream_protection",
            "Upstream calls the protection changed, by upstream and event: retry (a retry went "
            "out), retry_over_budget (a call made without its retry), circuit_open (not made)",
            ["upstream", "event"],
            registry=registry,
        )
        self.tags_created = Counter(
            "mlutp_tags_created",
            "Orders whose missing content tags were created",
            registry=registry,
        )
        self.need_request = Counter(
            "mlutp_need_request_parts",
            "Parts the poll told clients to fetch",
            ["service", "part"],
            registry=registry,
        )
        self.stale_orders = Counter(
            "mlutp_stale_orders",
            "Orders answered stale (source unavailable)",
            ["service"],
            registry=registry,
        )
        self.interval = Histogram(
            "mlutp_polling_interval_ms",
            "Polling intervals given to clients",
            buckets=(1000, 2000, 3000, 5000, 10000, 20000, 30000, 60000),
            registry=registry,
        )
        self.polls_in_flight = Gauge(
            "mlutp_polls_in_flight",
            "orders/state and launch polls being served",
            registry=registry,
        )
        self.polls_shed = Counter(
            "mlutp_polls_shed",
            "Polls answered 503 with Retry-After: past the cap of polls in progress",
            registry=registry,
        )
        self.admission_limit = Gauge(
            "mlutp_admission_limit",
            "The cap of polls in progress now: the looks the process clears in its budget",
            registry=registry,
        )
        self.look_cost = Gauge(
            "mlutp_look_cost_seconds",
            "CPU time one look (a poll's sources and tags) costs the process, as measured",
            registry=registry,
        )
        self.loop_lag = Histogram(
            "mlutp_event_loop_lag_seconds",
            "How late a timer fired in the event loop: the process's own queue",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=registry,
        )
        self.force = Counter(
            "mlutp_force",
            "Polls' force on an order: honoured, or over the order's budget and ignored",
            ["outcome"],
            registry=registry,
        )
        self.poll_orders = Counter(
            "mlutp_poll_orders",
            "Actual orders polled, by the client's policy version",
            ["service", "policy_version"],
            registry=registry,
        )
        self.part_requests = Counter(
            "mlutp_part_requests",
            "Part endpoint requests by service, part, policy version and its stage (current, "
            "announced, deprecated)",
            ["service", "part", "policy_version", "stage"],
            registry=registry,
        )
        self.part_coalesced = Counter(
            "mlutp_part_coalesced",
            "Part fetches that joined a running fetch of the same order",
            ["service", "part"],
            registry=registry,
        )
        self.part_upstream = Counter(
            "mlutp_part_upstream_orders",
            "Part fetches per order by outcome",
            ["service", "part", "outcome"],
            registry=registry,
        )

        # label lookups cost more than the update itself (a poll makes several): the children
        # of the per-poll counters kept per label set, made on first use as labels() makes
        # them, so /metrics shows the same series
        self._tag_cache_children: dict[str, Counter] = {}
        self._source_children: dict[tuple[str, str], Counter] = {}

    def tag_cache_call(self, outcome: str) -> Counter:
        """mlutp_tag_cache_calls of one outcome."""
        child = self._tag_cache_children.get(outcome)
        if child is None:
            child = self._tag_cache_children[outcome] = self.tag_cache.labels(outcome)
        return child

    def source_call(self, service: str, outcome: str) -> Counter:
        """mlutp_order_source_calls of one service and outcome."""
        key = (service, outcome)
        child = self._source_children.get(key)
        if child is None:
            child = self._source_children[key] = self.sources.labels(service, outcome)
        return child

    def ignored_names(self, ignored: Mapping[str, int]) -> None:
        """Count the names of supported_services a poll did not consider, by why."""
        for reason, count in ignored.items():
            self.ignored_service_names.labels(reason).inc(count)

    def upstream_event(self, upstream: str) -> Callable[[str], None]:
        """The counter of one upstream's protection events, as its `on_event`."""

        calls = self.upstream_calls.labels(upstream)
        events = {e: self.upstream_events.labels(upstream, e) for e in UPSTREAM_EVENTS}

        def count(event: str) -> None:
            if event == "call":
                calls.inc()
            else:
                events[event].inc()

        return count

"""Prometheus metrics: one registry per app, so apps in one process never collide."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class HttpMetrics:
    """Request count and latency per route and status, served on `GET /metrics`."""

    def __init__(self, service: str) -> None:
        self.registry = CollectorRegistry()
        self.service = service
        self.requests = Counter(
            "http_requests",
            "HTTP requests served, by route and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "http_request_duration_seconds",
            "HTTP request latency, by route and status",
            ["route", "method", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.slow_requests = Counter(
            "http_slow_requests",
            "Connections closed because a request did not arrive whole within the read "
            "timeout, by what was still missing (headers, body)",
            ["missing"],
            registry=self.registry,
        )

        # label lookups cost more than the update itself: keep the children per label set
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            labels = (route, method, str(status))
            children = (self.requests.labels(*labels), self.latency.labels(*labels))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

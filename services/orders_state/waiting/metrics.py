"""Metrics of the waiting poll (orders_state only: launch never waits)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class WaitingMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.waiting = Gauge(
            "mlutp_polls_waiting",
            "orders/state polls waiting for a wake-up now",
            registry=registry,
        )
        self.held = Gauge(
            "mlutp_polls_held",
            "orders/state polls held now: listening, looked, nothing to say yet",
            registry=registry,
        )
        self.answers = Counter(
            "mlutp_waiting_poll_answers",
            "Answers of polls that asked to wait, by cause (news: at once with news; wakeup: "
            "news after a wake-up or the min TTL; timeout: the wait ended with no news; "
            "unavailable: could not wait; shed: past the cap; shutdown; overloaded: a 503 of "
            "admission control, before the poll waited)",
            ["cause"],
            registry=registry,
        )
        self.wakeups = Counter(
            "mlutp_wakeups",
            "Waiting polls rung by a tag write on one of their orders",
            registry=registry,
        )
        self.messages = Counter(
            "mlutp_wakeup_messages",
            "Tag write messages received on the pub/sub connection",
            registry=registry,
        )
        self.channels = Gauge(
            "mlutp_wakeup_channels",
            "Order channels subscribed now (waited on, or lingering after a wait)",
            registry=registry,
        )
        self.pubsub_up = Gauge(
            "mlutp_wakeup_pubsub_up",
            "1 while every pub/sub connection of the process is up",
            registry=registry,
        )
        self.pubsub_lost = Counter(
            "mlutp_wakeup_pubsub_lost",
            "Pub/sub connections lost (Redis restarted, the connection killed or closed idle); "
            "each comes back by itself, subscribed again to the channels it had",
            registry=registry,
        )
        self.cached_looks = Counter(
            "mlutp_waiting_cached_looks",
            "Waiting polls held from the same client's last look with no new look (the watch "
            "cache: nothing heard on their channels since, and that look young enough)",
            registry=registry,
        )

"""The outbox of tag writes (docs/protocol.md: Feature data and user changes): the writes a
writer has recorded and not yet seen land, by order or list, kept beside the data they
describe. The emulator keeps it in its in-memory world; a real feature service keeps it as a
table written in the same transaction as the data it changes, so that a writer that restarts
finds its writes there. shared.tag_writer sends them, and counts how they fare."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import Field

from shared.config import Settings
from shared.protocol.tag_writes import ListWrite, OrderWrite
from shared.wire import ListKey, OrderKey

# the first retry within 0.1 s: a blip (a Redis failover, order_tags restarted) costs little
BACKOFF_BASE_S = 0.1
# a write kept through a long outage is tried at least this often: it lands at most this long
# after the store is back, and the clients' polls see the change then
BACKOFF_CAP_S = 2.0
# orders and lists with a write pending: one merged write each, a few hundred bytes; a feature
# service with more orders changing within an outage than this gives the excess up, as before
MAX_PENDING = 10_000
# retries in flight at once: after an outage the kept writes go out, not all in one burst
RETRY_CONCURRENCY = 16

GIVE_UP_REASONS = ("rejected", "superseded", "full")

Key = OrderKey | ListKey
Write = OrderWrite | ListWrite


class TagWriterSettings(Settings):
    backoff_base_s: float = Field(BACKOFF_BASE_S, gt=0)
    backoff_cap_s: float = Field(BACKOFF_CAP_S, gt=0)
    max_pending: int = Field(MAX_PENDING, ge=1)
    retry_concurrency: int = Field(RETRY_CONCURRENCY, ge=1)


class TagStore(Protocol):
    """The writes of order_tags (shared.order_tags_client.OrderTagsClient is one)."""

    async def set(
        self, service: str, orderid: str, tags: dict[str, str], *, user_id: str | None = None
    ) -> dict[str, str]: ...

    async def bump(self, service: str, orderid: str, parts: Sequence[str]) -> dict[str, str]: ...

    async def delete(self, service: str, orderid: str) -> bool: ...

    async def bump_list(self, service: str, user_id: str) -> str: ...


@dataclass
class Pending:
    """What is to be written for one key: `write` (None once it all landed), and what was
    recorded while it was being sent (`newer`), which goes after it."""

    write: Write | None
    # when the oldest write still pending in it was recorded (the loop's clock)
    since: float
    failures: int = 0
    # when it is retried (after a failure)
    due: float = 0.0
    in_flight: bool = False
    newer: Write | None = None
    newer_since: float = 0.0


@dataclass
class Outbox:
    """The tag writes not yet known to have landed, by order or list, oldest first."""

    pending: dict[Key, Pending] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.pending)

    def oldest_age_s(self, now: float) -> float:
        oldest = min((p.since for p in self.pending.values()), default=now)
        return max(0.0, now - oldest)


class TagWriteMetrics:
    """What a tag writer has pending and how its writes fare, on the writer's /metrics."""

    def __init__(
        self,
        registry: CollectorRegistry,
        pending_count: Callable[[], float],
        oldest_age_s: Callable[[], float],
    ) -> None:
        pending = Gauge(
            "mlutp_tag_writes_pending",
            "Orders and lists with a tag write not yet landed (kept for retry or in flight)",
            registry=registry,
        )
        pending.set_function(pending_count)
        oldest = Gauge(
            "mlutp_tag_write_oldest_pending_seconds",
            "Age of the oldest tag write not yet landed (0: none pending)",
            registry=registry,
        )
        oldest.set_function(oldest_age_s)
        self.failures = Counter(
            "mlutp_tag_write_failures",
            "Tag write attempts that failed with the store unavailable (the write is kept)",
            registry=registry,
        )
        self.retries = Counter(
            "mlutp_tag_write_retries", "Tag write attempts after a failure", registry=registry
        )
        self.given_up = Counter(
            "mlutp_tag_writes_given_up",
            "Tag writes given up, by reason: rejected (4xx, never retried), superseded (the "
            "order's tags deleted after it), full (failed with max_pending keys kept)",
            ["reason"],
            registry=registry,
        )
        for reason in GIVE_UP_REASONS:
            self.given_up.labels(reason)

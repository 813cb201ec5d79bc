"""When each fault was on, as the checks ask it: was the tag store impaired between two
moments, was a service's source, a part upstream, and how long after each fault its effects
may last by the contract's own rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from devtools.simulation.bff import SETTINGS
from devtools.simulation.clients import BACKOFF_CAP_S
from devtools.simulation.scenario import Fault

# after the tag store is back, its circuit may stay open this long (open_s, then a probe)
CIRCUIT_TAIL_S = 2.5
DEGRADED_TTL_S = SETTINGS.degraded_min_ttl_s
STORE_KINDS = frozenset({"store_down", "store_paused", "redis_outage", "flush"})


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    fault: Fault

    def overlaps(self, start: float, end: float) -> bool:
        return self.start <= end and start <= self.end


class Timeline:
    def __init__(self, faults: Sequence[Fault]) -> None:
        self.faults = list(faults)
        self.store = [
            Span(f.start, f.end + CIRCUIT_TAIL_S, f) for f in faults if f.kind in STORE_KINDS
        ]
        # a part tag issued while the store was unavailable is refetched on the degraded
        # rhythm, also after the store is back (docs/protocol.md: Tags and need_request): the
        # outage's effect on freshness lasts a degraded TTL longer
        self.degraded_tags = [
            Span(span.start, span.end + DEGRADED_TTL_S, span.fault) for span in self.store
        ]
        self.bump_loss = [Span(f.start, f.end, f) for f in faults if f.kind == "bump_loss"]

    def store_spans(self, start: float, end: float) -> list[Span]:
        """The tag store unavailable (or emptied) at some moment of [start, end]."""
        return [span for span in self.store if span.overlaps(start, end)]

    def emptied(self, start: float, end: float) -> bool:
        """The tag store lost its data (flushed, or back empty) at some moment of [start,
        end]."""
        return any(
            (f.kind == "flush" or (f.kind == "redis_outage" and f.empty)) and start <= f.end <= end
            for f in self.faults
        )

    def degraded_spans(self, start: float, end: float) -> list[Span]:
        """The store unavailable, or a tag issued while it was, at some moment of [start,
        end]."""
        return [span for span in self.degraded_tags if span.overlaps(start, end)]

    def source_spans(self, service: str, start: float, end: float) -> list[Span]:
        """The service's source down, slow or lagging at some moment of [start, end]; a
        lagging one's effect lasts its lag longer."""
        return [
            span
            for f in self.faults
            if f.kind.startswith("source_") and f.target == service
            for span in (Span(f.start, f.end + f.value, f),)
            if span.overlaps(start, end)
        ]

    def lag_at(self, service: str, start: float, end: float) -> float:
        """The longest lag of the service's source over [start, end] (0: none)."""
        return max(
            (
                f.value
                for f in self.faults
                if f.kind == "source_lagging"
                and f.target == service
                and f.start <= end
                and start <= f.end
            ),
            default=0.0,
        )

    def upstream_spans(self, upstream: str, start: float, end: float) -> list[Span]:
        """A part upstream failing at some moment of [start, end]: clients back off a part
        that failed for up to BACKOFF_CAP_S, so its effect lasts that much longer."""
        return [
            span
            for f in self.faults
            if f.kind.startswith("upstream_") and f.target == upstream
            for span in (Span(f.start, f.end + BACKOFF_CAP_S, f),)
            if span.overlaps(start, end)
        ]

    def edges(self) -> list[float]:
        """Every fault's start and end: windows are anchored there too."""
        return sorted({t for f in self.faults for t in (f.start, f.end)})

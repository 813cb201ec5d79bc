"""What a run records and reports: the violations, the clients as the checks see them, and the
trace of events shown around a violation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from emulator.documents import LIFECYCLES
from shared.answer import ActualOrder, StaleOrder


@dataclass
class Violation:
    t: float
    invariant: str
    message: str
    user_id: str = ""


@dataclass
class ClientInfo:
    name: str
    user_id: str
    wait_ms: int
    legacy_period_s: float
    start_t: float
    misbehaving: bool


@dataclass
class TraceEvent:
    t: float
    user_id: str
    # the text, or what makes it: most events are never shown, so most are never formatted
    text: str | Callable[[], str]

    def line(self) -> str:
        text = self.text if isinstance(self.text, str) else self.text()
        return f"  {self.t:9.3f}  {self.user_id or '-':>4}  {text}"


@dataclass
class Trace:
    events: list[TraceEvent] = field(default_factory=list)

    def add(self, t: float, user_id: str, text: str | Callable[[], str]) -> None:
        self.events.append(TraceEvent(t, user_id, text))

    def around(
        self, t: float, user_id: str, before_s: float = 30.0, after_s: float = 5.0
    ) -> list[str]:
        near = [
            event
            for event in self.events
            if t - before_s <= event.t <= t + after_s
            and (not user_id or event.user_id in (user_id, ""))
        ]
        before = [event.line() for event in near if event.t <= t][-45:]
        after = [event.line() for event in near if event.t > t][:15]
        return before + after


def shown(value: object) -> object:
    return bytes(value).decode() if isinstance(value, msgspec.Raw) else value


def status_index(service: str, status: str) -> int:
    lifecycle = LIFECYCLES[service]
    return lifecycle.index(status) if status in lifecycle else len(lifecycle)


def describe_orders(orders: Iterable[ActualOrder | StaleOrder]) -> str:
    parts = []
    for order in orders:
        if isinstance(order, ActualOrder):
            need = f" need={','.join(order.need_request)}" if order.need_request else ""
            parts.append(f"{order.orderid}:{order.status}{need}")
        else:
            parts.append(f"{order.orderid}:{order.status}(stale)")
    return "[" + " ".join(parts) + "]"

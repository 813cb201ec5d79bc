"""What the upstreams served: calls, bytes and work (emulator/work.py) per endpoint, and what
the callers sent."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

RECORDED_HEADERS = ("X-Yandex-UID", "User-Agent", "X-Request-Id", "Accept-Language")


@dataclass
class Stats:
    calls: Counter[str] = field(default_factory=Counter)
    bytes_sent: Counter[str] = field(default_factory=Counter)
    # the same per calling user (X-Yandex-UID): what one user's app made the upstreams do
    user_calls: dict[str, Counter[str]] = field(default_factory=dict)
    user_bytes_sent: dict[str, Counter[str]] = field(default_factory=dict)
    # work units spent building the answers (emulator/work.py), per endpoint and per user
    work: Counter[str] = field(default_factory=Counter)
    user_work: dict[str, Counter[str]] = field(default_factory=dict)
    # the same on /metrics, by endpoint
    on_work: Callable[[str, int], None] | None = None
    # the last requests per endpoint: tests check what the BFF forwarded
    recent: dict[str, deque[dict[str, Any]]] = field(default_factory=dict)

    def record_call(self, endpoint: str, headers: Any, body: Any) -> None:
        self.calls[endpoint] += 1
        user = headers.get("X-Yandex-UID")
        if user is not None:
            self.user_calls.setdefault(user, Counter())[endpoint] += 1
        recent = self.recent.setdefault(endpoint, deque(maxlen=50))
        recent.append(
            {
                "headers": {name: headers[name] for name in RECORDED_HEADERS if name in headers},
                "body": body,
            }
        )

    def record_bytes(self, endpoint: str, size: int, user: str | None = None) -> None:
        self.bytes_sent[endpoint] += size
        if user is not None:
            self.user_bytes_sent.setdefault(user, Counter())[endpoint] += size

    def record_work(self, endpoint: str, units: int, user: str | None = None) -> None:
        self.work[endpoint] += units
        if user is not None:
            self.user_work.setdefault(user, Counter())[endpoint] += units
        if self.on_work is not None:
            self.on_work(endpoint, units)

    def snapshot(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "bytes_sent": dict(self.bytes_sent),
            "work": dict(self.work),
            "recent": {name: list(items) for name, items in self.recent.items()},
        }

    def user_snapshot(self, user: str) -> dict[str, Any]:
        """Calls and bytes served to one user's requests (none yet: empty)."""
        return {
            "user_id": user,
            "calls": dict(self.user_calls.get(user, {})),
            "bytes_sent": dict(self.user_bytes_sent.get(user, {})),
            "work": dict(self.user_work.get(user, {})),
        }

"""Structured (JSON lines) logging, with the request id of the request being served."""

from __future__ import annotations

import contextvars
import logging
import random
import sys
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import msgspec

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "request_id", default=None
)

_encoder = msgspec.json.Encoder()
# attributes every LogRecord has; anything else was passed through `extra=` and is logged
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = request_id_var.get()
        if request_id is not None:
            entry["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _encoder.encode(entry).decode()


# a request slower than this is always in the access log (a held waiting poll is not slow: it
# waits by design, and says so in its X-Mlutp-Wait header; that includes one answered
# `unavailable` when Redis was lost while it was held, where a line each would be a burst of
# thousands in one instant)
SLOW_REQUEST_S = 1.0
HELD_WAITS = frozenset({"wakeup", "timeout", "shutdown", "unavailable"})


@dataclass(frozen=True)
class AccessLog:
    """Which requests the access log writes: every error (4xx, 5xx), every slow request, and
    a share of the rest, so that it costs what it is worth on the hot path."""

    sample: float = 0.01
    slow_s: float = SLOW_REQUEST_S
    rng: random.Random = field(default_factory=random.Random)

    def writes(self, status: int, elapsed_s: float, wait: str | None) -> bool:
        if status >= 400:
            return True
        if elapsed_s >= self.slow_s and wait not in HELD_WAITS:
            return True
        return self.sample > 0 and self.rng.random() < self.sample


# a warning of one kind is written at most once per this many seconds (`Sparse`)
SPARSE_WARNING_S = 10.0


class Sparse:
    """Writes a warning of each kind at most once per `period_s`, and counts the ones left out:
    the next one written says how many (`left_out`). In an outage a warning per request is a
    log storm (docs/capacity.md: At INFO, on a quiet machine), and writing it costs the
    struggling process CPU it lacks; the metrics count every failure, the log says that it
    happens and how often."""

    def __init__(
        self, period_s: float = SPARSE_WARNING_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.period_s = period_s
        self.clock = clock
        self._written_at: dict[Hashable, float] = {}
        self._left_out: dict[Hashable, int] = {}

    def admit(self, kind: Hashable) -> int | None:
        """None: leave this one out; else write it, saying how many of its kind were left out
        since the last one written."""
        now = self.clock()
        written_at = self._written_at.get(kind)
        if written_at is not None and now - written_at < self.period_s:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return None
        self._written_at[kind] = now
        return self._left_out.pop(kind, 0)

    def warning(self, logger: logging.Logger, msg: str, kind: Hashable, **extra: Any) -> None:
        """`logger.warning(msg, extra=...)` if `admit(kind)`, with `left_out` in `extra`."""
        left_out = self.admit(kind)
        if left_out is not None:
            logger.warning(msg, extra={**extra, "left_out": left_out})


def setup_logging(service: str, level: str = "INFO", json: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json:
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s {service} %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())

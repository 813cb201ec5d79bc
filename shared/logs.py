"""Structured (JSON lines) logging, with the request id of the request being served."""

from __future__ import annotations

import contextvars
import logging
import random
import sys
import time
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


def setup_logging(service: str, level: str = "INFO", json: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json:
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s {service} %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())

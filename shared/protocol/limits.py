"""What one request may hold (docs/protocol.md: Errors and limits)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What a poll's known_orders may hold; the settings (ProtocolSettings) read their
    defaults from here."""

    max_known_orders: int = 20
    max_extra_fields: int = 16
    max_extra_bytes: int = 2048

"""The demo API's own request bodies (everything else is passed through as it is)."""

from __future__ import annotations

from enum import StrEnum

import msgspec


class DemoService(StrEnum):
    TAXI = "taxi"
    EATS = "eats"
    GROCERY = "grocery"


class NewOrder(msgspec.Struct, forbid_unknown_fields=True):
    service: DemoService


class FaultName(StrEnum):
    TAG_CACHE = "tag_cache"
    EATS_SOURCE = "eats_source"
    TOTW = "totw"


class FaultSwitch(msgspec.Struct, forbid_unknown_fields=True):
    fault: FaultName
    on: bool


class DemoConfig(msgspec.Struct):
    user_id: str
    # legacy polling, for the traffic panel's comparison: one totw per order this often
    legacy_interval_s: float
    # which fault switches this stack allows
    faults: list[str]

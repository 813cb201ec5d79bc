"""Faults injected per upstream target: down, slow, answering 500, or lagging (reading a
replica one data version behind)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from enum import StrEnum

from aiohttp import web

from emulator.documents import SERVICES

TARGETS = frozenset(
    {f"source:{service}" for service in SERVICES}
    | {"totw", "eats_details", "grocery_details", "taxiroute"}
)
# the generic part upstreams (/parts/<name>): a target of its own each, so one part's
# upstream can be slowed or broken alone; and any service's source, the generic ones included
PART_TARGET_PREFIX = "part:"
_GENERIC_TARGET = re.compile(r"^(part:[a-z][a-z0-9_]{0,63}|source:[a-z][a-z0-9_]{0,31})$")


def known_target(target: str) -> bool:
    return target in TARGETS or _GENERIC_TARGET.match(target) is not None


class FaultMode(StrEnum):
    OK = "ok"
    DOWN = "down"
    SLOW = "slow"
    ERROR500 = "error500"
    # answers from a read replica one data version behind, unless the call asks for a newer
    # version (totw: a content tag v<N>), which the primary answers; an order source's
    # replica serves the user's list as it was delay_ms ago (0: one version behind) under
    # that list's own tag, whatever `at_least` it is asked for
    LAGGING = "lagging"


@dataclass(frozen=True)
class Fault:
    mode: FaultMode = FaultMode.OK
    delay_ms: int = 0


class Faults:
    def __init__(self) -> None:
        self._faults: dict[str, Fault] = {}

    def set(self, target: str, fault: Fault) -> None:
        if fault.mode is FaultMode.OK:
            self._faults.pop(target, None)
        else:
            self._faults[target] = fault

    def snapshot(self) -> dict[str, dict[str, object]]:
        return {t: {"mode": f.mode.value, "delay_ms": f.delay_ms} for t, f in self._faults.items()}

    def lagging(self, target: str) -> bool:
        fault = self._faults.get(target)
        return fault is not None and fault.mode is FaultMode.LAGGING

    def lag_s(self, target: str) -> float | None:
        """How far behind a lagging target's replica is (0: one data version); None when the
        target is not lagging."""
        fault = self._faults.get(target)
        if fault is None or fault.mode is not FaultMode.LAGGING:
            return None
        return fault.delay_ms / 1000

    async def hold(self, target: str) -> None:
        """A slow target holds its answer, already computed from the data as it was when the
        request came: so a change during the delay is one the answer does not show."""
        fault = self._faults.get(target)
        if fault is not None and fault.mode is FaultMode.SLOW:
            await asyncio.sleep(fault.delay_ms / 1000)

    async def apply(self, target: str, request: web.Request) -> None:
        """Act out a failing target's fault, if any; returns when the request may be served."""
        fault = self._faults.get(target)
        if fault is None:
            return
        if fault.mode is FaultMode.ERROR500:
            raise web.HTTPInternalServerError(reason=f"injected fault on {target}")
        elif fault.mode is FaultMode.DOWN:
            # the connection dies with no answer, as with a crashed or unreachable host
            if request.transport is not None:
                request.transport.abort()
            raise web.HTTPServiceUnavailable(reason=f"{target} is down")

"""The order sources and part upstreams in memory, and each BFF process's client of them
(services/bff/ports.py: OrderSource, PartUpstream) as services/bff/upstreams.py makes them:
its deadline, one retry on a 5xx or a lost connection (parts: on a timeout too), the
process's circuit breaker and retry budget (shared/http.py: Protection, on the real
CircuitBreaker and RetryBudget). Every attempt that reaches an upstream is logged with its
user: the load invariants count them window by window."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import msgspec

from devtools.simulation.documents import served
from devtools.simulation.world import World
from services.bff.poll import Caller
from services.bff.ports import Fetched, FetchOutcome
from shared import wire
from shared.http import Protection
from shared.protocol.circuit import CircuitBreaker
from shared.protocol.retry_budget import RetryBudget
from shared.upstream_wire import SourceKnownOrder, SourceResponse
from shared.wire import USER_HEADER, OrderKey

# services/bff/config.py: source_deadline_s, part_timeout_s, upstream_circuit_*
SOURCE_DEADLINE_S = 0.25
PART_TIMEOUT_S = 1.0
PART_DEADLINE_S = 2.1
CIRCUIT_FAILURES = 10
CIRCUIT_OPEN_S = 2.0
# the part upstream of each part type or part of its own → the service whose orders it serves
UPSTREAM_SERVICES = {
    "totw": "taxi",
    # each taxi part's own service (the default policy's)
    "order_core": "taxi",
    "order_settings": "taxi",
    "order_static": "taxi",
    "orderchat": "taxi",
    "orderperformerinfo": "taxi",
    "eats_full": "eats",
    "grocery_full": "grocery",
}


@dataclass
class Fault:
    """What an upstream does now: `ok`; `down` (refused, or 500); `slow` (answers after
    `delay_s`); `lagging` (a source's read replica `delay_s` behind its primary, answering
    the list tag of what it serves)."""

    mode: str = "ok"
    delay_s: float = 0.0


@dataclass(frozen=True)
class Call:
    t: float
    user_id: str
    target: str


class CallLog:
    def __init__(self) -> None:
        self.calls: list[Call] = []

    def add(self, user_id: str, target: str) -> None:
        self.calls.append(Call(asyncio.get_running_loop().time(), user_id, target))


class Attempt(Enum):
    OK = "ok"
    FAILED = "failed"  # a 5xx or a lost connection: retried
    TIMEOUT = "timeout"  # the attempt's deadline passed


class Guard:
    """One process's protection of one upstream, the product's own (shared/http.py:
    Protection, as UpstreamClient.post uses it): no call while the circuit is open (a call
    made while its probe is out waits for the probe's verdict, within half its deadline), a
    retry only within the budget, the circuit told of every call's end. (The product gives
    such a call the rest of its deadline; here its attempts keep theirs.)"""

    def __init__(self, clock: Callable[[], float], deadline_s: float) -> None:
        self.clock = clock
        self.deadline_s = deadline_s
        self.protection = Protection(
            CircuitBreaker(CIRCUIT_FAILURES, CIRCUIT_OPEN_S), RetryBudget(), clock=clock
        )

    @property
    def circuit(self) -> CircuitBreaker:
        return self.protection.circuit

    async def call(
        self, attempt: Callable[[], Any], *, retry_on_timeout: bool
    ) -> tuple[Attempt, Any]:
        admission = await self.protection.admit(self.deadline_s / 2)
        if admission == "refused":
            return Attempt.FAILED, None
        budget = self.protection.retry_budget
        now = self.clock()
        retries = 1 if budget.can_retry(now) else 0
        budget.call(now)
        outcome, value = Attempt.FAILED, None
        try:
            for number in range(1 + retries):
                if number:
                    budget.retry(self.clock())
                outcome, value = await attempt()
                if outcome is Attempt.OK or (outcome is Attempt.TIMEOUT and not retry_on_timeout):
                    break
        except BaseException:
            self.circuit.abandon()
            self.protection.verdict(admission, False)
            raise
        if outcome is Attempt.OK:
            self.circuit.success()
        else:
            self.circuit.failure(self.clock())
        self.protection.verdict(admission, outcome is Attempt.OK)
        return outcome, value


# what a lagging replica answers as `list_tag` for data whose list tag it does not know (the
# user had no list yet, or the bump after that version never landed): a tag no list has, so
# the BFF takes the answer for what it is, lagging
UNKNOWN_LIST_TAG = "replica-without-tag"


class SourceBackend:
    """One service's order source: its primary, and a read replica while it lags.

    `untagged_replica`: a lagging replica answers no `list_tag` for data it has no tag for,
    as the emulator's did, instead of UNKNOWN_LIST_TAG. The contract asks a source with list
    tags to name one in every answer, and the BFF uses an answer that names none for its
    poll alone, never keeping it (tests/simulation/test_untagged_replicas.py)."""

    def __init__(
        self,
        service: str,
        world: World,
        rng: random.Random,
        log: CallLog,
        *,
        untagged_replica: bool = False,
    ) -> None:
        self.service = service
        self.world = world
        self.rng = rng
        self.log = log
        self.untagged_replica = untagged_replica
        self.fault = Fault()

    async def attempt(self, user_id: str, at_least: str | None) -> tuple[Attempt, Any]:
        self.log.add(user_id, f"source:{self.service}")
        fault = self.fault
        if fault.mode == "down":
            await asyncio.sleep(0.001)
            return Attempt.FAILED, None
        delay = fault.delay_s if fault.mode == "slow" else 0.002 + self.rng.random() * 0.008
        if delay >= SOURCE_DEADLINE_S:
            await asyncio.sleep(SOURCE_DEADLINE_S)
            return Attempt.TIMEOUT, None
        await asyncio.sleep(delay)
        if self.fault.mode == "lagging":
            served = self.world.as_of(self.service, user_id, self.fault.delay_s)
            tag = served.tag
            if tag is None and not self.untagged_replica:
                tag = UNKNOWN_LIST_TAG
            return Attempt.OK, msgspec.structs.replace(served.answer, list_tag=tag)
        # the primary: its data is at least as new as any list tag read before the call
        listing = self.world.listing(self.service, user_id)
        return Attempt.OK, msgspec.structs.replace(listing, list_tag=at_least)


class SourceClient:
    """A process's client of one order source (services/bff/ports.py: OrderSource)."""

    def __init__(self, backend: SourceBackend, clock: Callable[[], float]) -> None:
        self.service = backend.service
        self.backend = backend
        self.guard = Guard(clock, SOURCE_DEADLINE_S)

    async def list_active(
        self,
        caller: Caller,
        known: Sequence[SourceKnownOrder] = (),
        at_least: str | None = None,
    ) -> SourceResponse | None:
        # the user id a real source reads from the forwarded X-Yandex-UID
        user_id = caller.headers[USER_HEADER]
        outcome, answer = await self.guard.call(
            lambda: self.backend.attempt(user_id, at_least), retry_on_timeout=False
        )
        return answer if outcome is Attempt.OK else None


class UpstreamBackend:
    """A part upstream (totw, eats or grocery details, the performer info service)."""

    def __init__(self, name: str, world: World, rng: random.Random, log: CallLog) -> None:
        self.name = name
        self.service = UPSTREAM_SERVICES[name]
        self.world = world
        self.rng = rng
        self.log = log
        self.fault = Fault()

    async def attempt(self, key: OrderKey, user_id: str) -> tuple[Attempt, Any]:
        self.log.add(user_id, self.name)
        fault = self.fault
        if fault.mode == "down":
            await asyncio.sleep(0.002)
            return Attempt.FAILED, None
        delay = fault.delay_s if fault.mode == "slow" else 0.005 + self.rng.random() * 0.025
        if delay >= PART_TIMEOUT_S:
            await asyncio.sleep(PART_TIMEOUT_S)
            return Attempt.TIMEOUT, None
        await asyncio.sleep(delay)
        document = self.world.document(key, user_id)
        if document is None:
            # a 404: the upstream does not know the order for this user
            return Attempt.OK, Fetched(FetchOutcome.EXPIRED)
        # stamped with whom it was served to and the order's revision now
        revision = self.world.orders[key].revision
        body = wire.encode({**served(document, user_id, revision), "orderid": key.orderid})
        return Attempt.OK, Fetched(FetchOutcome.OK, body)


class UpstreamClient:
    """A process's client of one part upstream (services/bff/ports.py: PartUpstream)."""

    def __init__(self, backend: UpstreamBackend, clock: Callable[[], float]) -> None:
        self.backend = backend
        self.guard = Guard(clock, PART_DEADLINE_S)

    async def fetch(self, body: Mapping[str, Any], caller: Caller) -> Fetched:
        key = OrderKey(self.backend.service, str(body["orderid"]))
        user_id = caller.headers[USER_HEADER]
        outcome, fetched = await self.guard.call(
            lambda: self.backend.attempt(key, user_id), retry_on_timeout=True
        )
        return fetched if outcome is Attempt.OK else Fetched(FetchOutcome.STALE)

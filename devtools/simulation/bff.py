"""One BFF process (an orders_state replica) of the simulation: the real engine, listings,
tag cache (behind its circuit breaker and the joined tag reads, as services/bff/resources.py
wires them), admission, waiting polls and part service (with the shared part cache's real
client on the store's Redis: one set of entries for the fleet), over the simulated tag store,
sources, upstreams and wake-ups. What the aiohttp handlers do around them (parse the body,
answer 503 past the cap) is done here in a few lines; the HTTP layer itself is not simulated.

It is observed through the observer ports the engine and the waiting polls take
(devtools/simulation/observed.py), none changing what the product does."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from prometheus_client import CollectorRegistry

from devtools.simulation.observed import KeptLookChecks, PollObserver, ProcessLooks
from devtools.simulation.store import SimTagStore
from devtools.simulation.wakeups import CURRENT_POLL, PollState, SimWakeups
from services.bff.admission import Admission
from services.bff.config import ProtocolSettings
from services.bff.engine import OrdersStateEngine
from services.bff.known_orders import parse_poll
from services.bff.metrics import BffMetrics
from services.bff.part_cache import RedisPartCache
from services.bff.part_request import RequestedOrder
from services.bff.part_service import PartService
from services.bff.poll import Caller, Poll
from services.bff.ports import OrderSource, PartUpstream
from services.bff.resources import (
    budget_limit,
    degraded_memo,
    engine_config,
    limits,
    part_cache_ttl_ms,
    recent_memo,
    tag_cache_breaker,
)
from services.bff.tag_cache import TagCache
from services.bff.tag_reads import JoinedTagReads
from services.orders_state.config import OrdersStateSettings
from services.orders_state.waiting.metrics import WaitingMetrics
from services.orders_state.waiting.polls import WaitCause, WaitingPolls
from services.orders_state.waiting.setup import waiting_config
from shared.answer import AnsweredOrder
from shared.config import RedisSettings
from shared.errors import Overloaded
from shared.policy import PollingPolicy, Stage
from shared.redis import RedisClient
from shared.wire import USER_HEADER

# the protocol's numbers as a deployment has them by default (the environment is not read:
# a run depends on its seed alone)
SETTINGS = ProtocolSettings.model_construct()
# the waiting polls' numbers, the services' defaults (nothing read from the environment)
WAITING_SETTINGS = OrdersStateSettings.model_construct(protocol=SETTINGS)
# the part cache's Redis client's deadline per command, the services' default
REDIS_SETTINGS = RedisSettings.model_construct()


class Refused(Exception):
    """The process takes no new request (it is stopping or not started): connection refused."""


def _caller(user_id: str) -> Caller:
    """A simulated request's caller: the user id, forwarded as the gateway's header."""
    return Caller(user_id, {USER_HEADER: user_id})


@dataclass
class PollReply:
    """An orders/state answer as the client reads it (or a 503)."""

    status: int
    started: float
    answered: float
    wait_ms: int
    known: list[dict[str, Any]]
    orders: list[AnsweredOrder] = field(default_factory=list)
    interval_ms: int = 0
    cause: WaitCause | None = None
    degraded: bool = False
    retry_after_s: int = 0
    launch: bool = False


class BffProcess:
    def __init__(
        self,
        name: str,
        policy: PollingPolicy,
        store: SimTagStore,
        sources: Mapping[str, OrderSource],
        upstreams: Mapping[str, PartUpstream],
        observer: PollObserver,
        rng: random.Random,
        *,
        watch_cache: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.name = name
        self.policy = policy
        self.observer = observer
        registry = CollectorRegistry()
        metrics = BffMetrics(registry)
        settings = SETTINGS
        self.joined = JoinedTagReads(
            store,
            max_in_flight=settings.tag_reads.in_flight,
            gather_s=settings.tag_reads.gather_ms / 1000,
        )
        self.tag_cache = TagCache(
            self.joined,
            tag_cache_breaker(settings),
            metrics,
            clock=loop.time,
            wall_clock=time.time,
        )
        self.admission = Admission(
            budget_limit(settings),
            overload_in_flight=settings.admission.overload_in_flight,
            overload_max_factor=settings.admission.overload_max_factor,
            retry_after_base_s=settings.admission.overload_retry_after_s,
            metrics=metrics,
            rng=random.Random(rng.random()),
            cpu_clock=loop.time,
        )
        engine = OrdersStateEngine(
            policy,
            sources,
            self.tag_cache,
            engine_config(settings, policy),
            metrics,
            overload=self.admission.overload,
            rng=random.Random(rng.random()),
            observer=ProcessLooks(observer, name, self._lost),
        )
        self.engine = engine
        self.hub = SimWakeups(loop.time, lambda: store.up, observer)
        store.subscribers.append(self.hub)
        self.waiting = WaitingPolls(
            engine,
            self.admission,
            self.hub,
            replace(waiting_config(WAITING_SETTINGS), watch_cache=watch_cache),
            WaitingMetrics(registry),
            rng=random.Random(rng.random()),
            observer=KeptLookChecks(observer, name, engine, self.hub),
        )
        self.parts = PartService(
            policy,
            self.tag_cache,
            upstreams,
            metrics,
            sources,
            coalesce=settings.part_fetches.coalesce,
            degraded_memo=degraded_memo(settings),
            recent_memo=recent_memo(settings),
            shared_parts=self._part_cache(store, metrics, settings),
            shared_ttl_ms=part_cache_ttl_ms(settings),
        )
        self.limits = limits(settings)
        self.endpoints = {
            endpoint.rule.url: endpoint
            for endpoint in policy.endpoints
            if endpoint.stage is Stage.CURRENT
        }
        self.accepting = True
        self.in_flight = 0
        # part requests in flight, and how many were when the process was told to stop: each
        # finishes within its fetch's deadline, longer than a look's
        self.parts_in_flight = 0
        self.parts_at_stop = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @staticmethod
    def _part_cache(
        store: SimTagStore, metrics: BffMetrics, settings: ProtocolSettings
    ) -> RedisPartCache:
        """The shared part cache as services/bff/resources.py opens it, on the store's Redis
        (its commands only, not a redis-py client: hence the cast) and the loop's clock."""
        cache = settings.part_cache
        return RedisPartCache(
            cast("RedisClient", store.redis),
            metrics,
            ttl_ms=part_cache_ttl_ms(settings),
            max_entries=cache.max_entries,
            max_entry_bytes=cache.max_entry_bytes,
            zlib_level=cache.zlib_level,
            deadline_s=REDIS_SETTINGS.command_deadline_s,
            breaker=tag_cache_breaker(settings),
            clock=asyncio.get_running_loop().time,
        )

    def _lost(self) -> str:
        if not self.tag_cache.available:
            return "the tag cache"
        if not self.hub.available:
            return "pub/sub"
        return ""

    def _enter(self) -> None:
        if not self.accepting:
            raise Refused(f"{self.name} is not accepting requests")
        self.in_flight += 1
        self._idle.clear()

    def _leave(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self._idle.set()

    # --- the client-facing endpoints -----------------------------------------------------

    async def orders_state(self, user_id: str, body: dict[str, Any]) -> PollReply:
        loop = asyncio.get_running_loop()
        self._enter()
        CURRENT_POLL.set(PollState())
        started = loop.time()
        wait_ms = int(body.get("wait_ms", 0))
        known = body["known_orders"]
        try:
            try:
                # a shed poll is refused before its body is read
                self.admission.check()
                parsed = parse_poll(self.limits, known, body.get("supported_services"))
                poll = Poll(
                    _caller(user_id),
                    parsed.known_orders,
                    parsed.services,
                    body.get("policy_versions") or {},
                    wait_ms,
                )
                answer = await self.waiting.answer(poll)
            except Overloaded as exc:
                reply = PollReply(
                    503,
                    started,
                    loop.time(),
                    wait_ms,
                    known,
                    retry_after_s=int(exc.headers["Retry-After"]),
                )
            else:
                result = answer.result
                reply = PollReply(
                    200,
                    started,
                    loop.time(),
                    wait_ms,
                    known,
                    result.orders,
                    result.interval_ms,
                    answer.cause,
                    result.degraded,
                )
            self.observer.answered(self.name, user_id, reply)
            return reply
        finally:
            self._leave()

    async def launch(self, user_id: str, body: dict[str, Any]) -> PollReply:
        """Launch's orders (its policy is the client's already; extended order info is not
        simulated): a look that hands out the versions, never waiting."""
        loop = asyncio.get_running_loop()
        self._enter()
        started = loop.time()
        known = body["known_orders"]
        try:
            parsed = parse_poll(self.limits, known, body["supported_services"], only_supported=True)
            poll = Poll(
                _caller(user_id),
                parsed.known_orders,
                parsed.services,
                body.get("policy_versions") or {},
            )
            try:
                with self.admission.admit():
                    result = await self.engine.look(poll, handing_out=True)
            except Overloaded as exc:
                reply = PollReply(
                    503,
                    started,
                    loop.time(),
                    0,
                    known,
                    retry_after_s=int(exc.headers["Retry-After"]),
                    launch=True,
                )
            else:
                reply = PollReply(
                    200,
                    started,
                    loop.time(),
                    0,
                    known,
                    result.orders,
                    result.interval_ms,
                    None,
                    result.degraded,
                    launch=True,
                )
            self.observer.answered(self.name, user_id, reply)
            return reply
        finally:
            self._leave()

    async def part(
        self, user_id: str, url: str, orders: Sequence[tuple[str, str | None]]
    ) -> list[dict[str, Any]]:
        self._enter()
        self.parts_in_flight += 1
        try:
            endpoint = self.endpoints[url]
            parts = await self.parts.fetch_parts(
                endpoint,
                [RequestedOrder(orderid, tag) for orderid, tag in orders],
                {"format_currency": True},
                _caller(user_id),
            )
            self.observer.part_answered(user_id, endpoint, parts)
            return parts
        finally:
            self.parts_in_flight -= 1
            self._leave()

    # --- stopping ------------------------------------------------------------------------

    async def stop(self) -> float:
        """SIGTERM: no new request, every waiting poll answered at once, the requests in
        flight finished, the answers being kept written. How long it took."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.parts_at_stop = self.parts_in_flight
        self.accepting = False
        self.waiting.shutdown()
        await self._idle.wait()
        await self.engine.listings.drain()
        await self.joined.close()
        self.hub.close()
        return loop.time() - started

    @property
    def holding(self) -> int:
        """Polls waiting or held now."""
        return self.waiting.waiting + self.waiting.held

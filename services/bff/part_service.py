"""The part endpoints: for each order, first read the content tag, then call the upstream,
and answer exactly the rule's fields the upstream returned, plus a new tag.

Reading the tag before the data means a change racing with the fetch costs at most one extra
fetch, never a lost update: the data is at least as new as the tag says.

A part whose data the shared part cache (services.bff.part_cache) keeps for the requesting
user, the same question to the upstream and the content tag current now is answered from it,
on any replica, with no upstream call (docs/protocol.md: Part endpoints, stage 4; that step is
services.bff.part_cache_step's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from services.bff.fetch_memo import FetchMemo, Remembered
from services.bff.field_cut import FieldCut
from services.bff.metrics import BffMetrics
from services.bff.order_fetch import NOT_READ, FetchKey, OrderFetch, Preread, StartedFetch
from services.bff.part_cache_step import PartCacheStep
from services.bff.part_request import RequestedOrder
from services.bff.poll import Caller
from services.bff.ports import (
    Fetched,
    FetchOutcome,
    OrderSource,
    PartUpstream,
    SharedParts,
    error_part,
)
from services.bff.tag_cache import TagCache
from shared.policy import PartEndpoint, PollingPolicy
from shared.protocol.parts import part_unchanged, upstream_params_digest
from shared.protocol.route import route_orderid
from shared.protocol.tags import encode_tag, upstream_content_tags
from shared.wire import OrderKey, PartData


class PartService:
    def __init__(
        self,
        policy: PollingPolicy,
        tag_cache: TagCache,
        upstreams: Mapping[str, PartUpstream],
        metrics: BffMetrics,
        sources: Mapping[str, OrderSource],
        *,
        coalesce: bool,
        degraded_memo: FetchMemo,
        recent_memo: FetchMemo,
        shared_parts: SharedParts | None = None,
        shared_ttl_ms: int = 0,
    ) -> None:
        self.policy = policy
        self.tag_cache = tag_cache
        self.upstreams = upstreams
        # the route part finds the user's one active order when the request names none
        self.sources = sources
        self.metrics = metrics
        self.coalesce = coalesce
        # while the tag cache is down: one upstream call per order per degraded TTL
        self.degraded_memo = degraded_memo
        # with it up: one per order per min TTL while the order's content tags stay the same
        self.recent_memo = recent_memo
        # part data kept for every replica (None: no shared cache, the memos alone)
        self.part_cache = (
            PartCacheStep(shared_parts, tag_cache, metrics, ttl_ms=shared_ttl_ms)
            if shared_parts is not None
            else None
        )
        self._in_flight: dict[FetchKey, OrderFetch] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._cuts = {
            endpoint.rule.url: FieldCut(endpoint.rule.fields) for endpoint in policy.endpoints
        }

    def _part(
        self,
        endpoint: PartEndpoint,
        orderid: str,
        fetched: Fetched,
        content: str | None,
        issued_ms: int,
        *,
        degraded: bool = False,
    ) -> PartData:
        """Exactly the rule's fields the upstream returned (an absent one means "delete it"),
        plus the new tag; or the order's error."""
        if fetched.body is not None:
            try:
                fields = self._cuts[endpoint.rule.url].cut(fetched.body)
            except msgspec.DecodeError:
                fetched = Fetched(FetchOutcome.STALE)
            else:
                self._count(endpoint, fetched.outcome)
                tag = encode_tag(endpoint.policy_version, content, issued_ms, degraded=degraded)
                return {"orderid": orderid, "tag": tag, **fields}
        self._count(endpoint, fetched.outcome)
        return error_part(orderid, fetched.outcome)

    def _count(self, endpoint: PartEndpoint, outcome: FetchOutcome) -> None:
        self.metrics.part_upstream.labels(endpoint.service, endpoint.rule.part_name, outcome).inc()

    def count_request(self, endpoint: PartEndpoint) -> None:
        self.metrics.part_requests.labels(
            endpoint.service,
            endpoint.rule.part_name,
            endpoint.policy_version,
            endpoint.stage.value,
        ).inc()

    def _key(self, endpoint: PartEndpoint, orderid: str, caller: Caller) -> FetchKey:
        return FetchKey(endpoint.rule.upstream_name, endpoint.service, orderid, caller.user_id)

    async def fetch_parts(
        self,
        endpoint: PartEndpoint,
        orders: Sequence[RequestedOrder],
        other_fields: Mapping[str, Any],
        caller: Caller,
    ) -> list[PartData]:
        """Each order's fetch is its content tags, then its upstream call; one that is
        already running for the same order, user and request is joined instead of repeated,
        so a client fetching several parts of an order at once costs the upstream one call."""
        self.count_request(endpoint)
        now_ms = int(time.time() * 1000)
        preread, unchanged = await self._unchanged(endpoint, orders, caller, now_ms)
        rest = [order for order in orders if order.orderid not in unchanged]
        params = upstream_params_digest(other_fields, caller.headers)
        kept: dict[str, PartData] = {}
        if self.part_cache is not None:
            preread, hits = await self.part_cache.kept(endpoint, rest, params, caller, preread)
            kept = {
                orderid: self._part(
                    endpoint, orderid, Fetched(FetchOutcome.OK, hit.fields), content, hit.issued_ms
                )
                for orderid, (content, hit) in hits.items()
            }
        fetched = await self._fetch(
            endpoint,
            [order for order in rest if order.orderid not in kept],
            other_fields,
            caller,
            preread,
            now_ms,
            params,
        )
        return [
            unchanged.get(order.orderid) or kept.get(order.orderid) or fetched[order.orderid]
            for order in orders
        ]

    async def _unchanged(
        self,
        endpoint: PartEndpoint,
        orders: Sequence[RequestedOrder],
        caller: Caller,
        now_ms: int,
    ) -> tuple[Preread, dict[str, PartData]]:
        """The orders whose part the app already holds (shared.protocol.parts.part_unchanged),
        answered with a new tag and no data. The tags are read first where an order holds a
        tag, and that read stands for the fetches of the rest (tag before data): a part
        fetched after a change costs one read, as before."""
        if not any(
            upstream_content_tags(order.client_tag, endpoint.policy_version, now_ms)
            for order in orders
        ):
            return NOT_READ, {}
        keys = [OrderKey(endpoint.service, order.orderid) for order in orders]
        read = await self.tag_cache.read(keys, [])
        if read is None:
            return None, {}
        part_name = endpoint.rule.part_name
        unchanged: dict[str, PartData] = {}
        for order, key in zip(orders, keys, strict=True):
            stored = (read.tags.get(key) or {}).get(part_name)
            if part_unchanged(
                order.client_tag,
                endpoint.policy_version,
                stored,
                owner=read.owners.get(key),
                user_id=caller.user_id,
                now_ms=now_ms,
            ):
                self._count_unchanged(endpoint)
                tag = encode_tag(endpoint.policy_version, stored, now_ms)
                unchanged[order.orderid] = {"orderid": order.orderid, "tag": tag, "unchanged": True}
        return read.tags, unchanged

    def _count_unchanged(self, endpoint: PartEndpoint) -> None:
        self.metrics.part_upstream.labels(
            endpoint.service, endpoint.rule.part_name, "unchanged"
        ).inc()

    async def _fetch(
        self,
        endpoint: PartEndpoint,
        orders: Sequence[RequestedOrder],
        other_fields: Mapping[str, Any],
        caller: Caller,
        preread: Preread,
        now_ms: int,
        params: str = "",
    ) -> dict[str, PartData]:
        """Each order's part from its upstream (or a fetch remembered or running); those its
        own question fetched from the upstream are kept in the shared cache."""
        if not orders:
            return {}
        loop = asyncio.get_running_loop()
        part_name = endpoint.rule.part_name
        fetches: list[OrderFetch] = []
        started: list[StartedFetch] = []
        for order in orders:
            key = self._key(endpoint, order.orderid, caller)
            running = self._in_flight.get(key) if self.coalesce else None
            if running is None:
                running = OrderFetch(loop.create_future(), params=params)
                if self.coalesce:
                    self._in_flight[key] = running
                started.append(StartedFetch(order, running, key))
            else:
                self.metrics.part_coalesced.labels(endpoint.service, endpoint.rule.part_name).inc()
            # two devices of a user asking one part: the first one's tag goes
            running.parts.add(part_name)
            content_tag = upstream_content_tags(order.client_tag, endpoint.policy_version, now_ms)
            if content_tag is not None:
                running.content_tags.setdefault(part_name, content_tag)
            fetches.append(running)
        if started:
            # runs on its own: a request that goes away must not fail those that joined it
            task = asyncio.create_task(
                self._run(endpoint, started, other_fields, caller, preread), name="part-fetch"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        results = await asyncio.gather(*(asyncio.shield(fetch.fetched) for fetch in fetches))
        parts: dict[str, PartData] = {}
        to_keep: list[tuple[str, OrderFetch, PartData]] = []
        for order, fetch, fetched in zip(orders, fetches, results, strict=True):
            # unknown content (cache down, or none stored) never matches: refetched later
            content = (
                fetch.stored.get(part_name) if fetch.cache_available and fetch.stored else None
            )
            parts[order.orderid] = self._part(
                endpoint,
                order.orderid,
                fetched,
                content,
                fetch.issued_ms,
                degraded=not fetch.cache_available,
            )
            if (
                fetch.called
                and fetch.cache_available
                and fetch.params == params
                and fetched.outcome is FetchOutcome.OK
                and "tag" in parts[order.orderid]
            ):
                to_keep.append((order.orderid, fetch, parts[order.orderid]))
        if self.part_cache is not None:
            await self.part_cache.keep(endpoint, to_keep, caller)
        return parts

    async def _run(
        self,
        endpoint: PartEndpoint,
        started: list[StartedFetch],
        other_fields: Mapping[str, Any],
        caller: Caller,
        preread: Preread = NOT_READ,
    ) -> None:
        try:
            upstream = self.upstreams[endpoint.rule.upstream_name]
            # first the content tags (one batch read for the request, unless the request read
            # them already), and only then the data
            keys = [OrderKey(endpoint.service, one.order.orderid) for one in started]
            stored = await self.tag_cache.get(keys) if preread is NOT_READ else preread
            issued_ms = int(time.time() * 1000)
            for order_key, one in zip(keys, started, strict=True):
                one.fetch.cache_available = stored is not None
                one.fetch.stored = stored.get(order_key) if stored is not None else None
                one.fetch.issued_ms = issued_ms

            async def fetch_one(one: StartedFetch) -> None:
                memo = self.degraded_memo if stored is None else self.recent_memo
                remembered = memo.get(one.key, issued_ms)
                # a remembered fetch answers only while the order's content tags are those
                # read before it: a change since then is fetched
                if remembered is not None and remembered.stored == one.fetch.stored:
                    counter = (
                        self.metrics.part_degraded_memo
                        if stored is None
                        else self.metrics.part_recent
                    )
                    counter.labels(endpoint.service, endpoint.rule.part_name).inc()
                    one.fetch.issued_ms = remembered.issued_ms
                    one.fetch.fetched.set_result(remembered.fetched)
                    return
                body = {**other_fields, "orderid": one.order.orderid}
                if one.fetch.content_tags:
                    # the client's content tags, never its tag: the envelope stays here
                    body["tags"] = dict(one.fetch.content_tags)
                else:
                    body.pop("tags", None)
                # the content tags read before the call, which the answer's tags will carry:
                # an upstream with versions answers no older (a lagging read replica must
                # not hand out old data under a new tag)
                at_least = {
                    part: one.fetch.stored[part]
                    for part in sorted(one.fetch.parts)
                    if one.fetch.stored and part in one.fetch.stored
                }
                if at_least:
                    body["at_least"] = at_least
                else:
                    body.pop("at_least", None)
                one.fetch.called = True
                fetched = await upstream.fetch(body, caller)
                # a failure too, like a success: the parts of one document fetched one after
                # another share its one failed call, and a client that asks again on every
                # poll gets no more calls of a failing upstream than of a healthy one
                memo.put(one.key, Remembered(fetched, issued_ms, one.fetch.stored), issued_ms)
                one.fetch.fetched.set_result(fetched)

            await asyncio.gather(*(fetch_one(one) for one in started))
        finally:
            for one in started:
                if not one.fetch.fetched.done():
                    one.fetch.fetched.set_result(Fetched(FetchOutcome.STALE))
                if self._in_flight.get(one.key) is one.fetch:
                    del self._in_flight[one.key]

    async def fetch_route(
        self, endpoint: PartEndpoint, body: dict[str, Any], caller: Caller
    ) -> PartData:
        """The route part: taxiroute proxied for one order. It has no content tag (the
        client polls it by its own route rules), so its tag's content is unknown."""
        self.count_request(endpoint)
        orderid = body.get("orderid")
        if orderid is None:
            listed = await self.sources[endpoint.service].list_active(caller)
            active = (
                [(order.created_at, order.orderid) for order in listed.orders]
                if listed is not None
                else None
            )
            orderid = route_orderid(None, active)
        body = {name: value for name, value in body.items() if value is not None}
        body["orderid"] = orderid
        fetched = await self.upstreams[endpoint.rule.upstream_name].fetch(body, caller)
        return self._part(endpoint, orderid, fetched, None, int(time.time() * 1000))

"""The part endpoints: for each order, first read the content tag, then call the upstream,
and answer exactly the rule's fields the upstream returned, plus a new tag.

Reading the tag before the data means a change racing with the fetch costs at most one extra
fetch, never a lost update: the data is at least as new as the tag says.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

import aiohttp
import msgspec

from services.bff.metrics import BffMetrics
from services.bff.tag_cache import TagCache
from services.orders_state.wire import PartRequest
from shared import wire
from shared.errors import BadRequest, ServiceUnavailable
from shared.http import RetryPolicy, UpstreamClient, UpstreamResponse
from shared.policy import PartEndpoint, PollingPolicy
from shared.protocol.tags import encode_tag, part_content
from shared.wire import OrderKey

log = logging.getLogger("mlutp.parts")


class FieldCut:
    """Cuts a part's fields out of an upstream document without building the rest of it:
    the fields are decoded as raw JSON and written back unparsed."""

    def __init__(self, fields: tuple[str, ...]) -> None:
        attributes = [f"f{i}" for i in range(len(fields))]
        self._pairs = list(zip(attributes, fields, strict=True))
        document_type = msgspec.defstruct(
            "PartFields",
            [(name, msgspec.Raw | msgspec.UnsetType, msgspec.UNSET) for name in attributes],
            rename=dict(self._pairs),
        )
        self._decoder = msgspec.json.Decoder(document_type)

    def cut(self, body: bytes) -> dict[str, msgspec.Raw]:
        """The fields present in the document; raises msgspec.DecodeError on garbage."""
        document = self._decoder.decode(body)
        present = {}
        for attribute, name in self._pairs:
            value = getattr(document, attribute)
            if value is not msgspec.UNSET:
                present[name] = value
        return present


class FetchOutcome(StrEnum):
    OK = "ok"
    EXPIRED = "expired"  # the upstream does not know the order (for this user): it is gone
    STALE = "stale"  # the upstream failed; the client keeps what it has and retries


@dataclass(frozen=True)
class Fetched:
    outcome: FetchOutcome
    body: bytes | None = None


class PartUpstreamClient(UpstreamClient):
    """An upstream of parts (totw, eats or grocery details, taxiroute): one retry on a 5xx,
    a timeout or a connection error; none on a 4xx."""

    @classmethod
    async def create(
        cls,
        url: str,
        *,
        timeout_s: float,
        deadline_s: float,
        session: aiohttp.ClientSession | None = None,
    ) -> Self:
        return cls(
            url,
            session=session,
            attempt_timeout_s=timeout_s,
            deadline_s=deadline_s,
            retry=RetryPolicy(attempts=2, retry_on_5xx=True, retry_on_timeout=True),
        )

    async def fetch(self, body: Mapping[str, Any], headers: dict[str, str]) -> Fetched:
        try:
            response = await self.post("", wire.encode(body), headers=headers)
        except (TimeoutError, aiohttp.ClientError) as exc:
            log.warning("part upstream failed", extra={"url": self.base_url, "error": repr(exc)})
            return Fetched(FetchOutcome.STALE)
        return self._outcome(response)

    def _outcome(self, response: UpstreamResponse) -> Fetched:
        if response.status == 404:
            return Fetched(FetchOutcome.EXPIRED)
        if response.status != 200:
            return Fetched(FetchOutcome.STALE)
        return Fetched(FetchOutcome.OK, response.body)

    async def pass_through(self, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        """The legacy call as it is: same body, same answer."""
        try:
            return await self.post("", body, headers=headers)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ServiceUnavailable(
                f"the upstream did not answer: {exc!r}", code="upstream_unavailable"
            ) from exc


def error_part(orderid: str, outcome: FetchOutcome) -> dict[str, Any]:
    return {"orderid": orderid, "error": {"update_status": outcome.value}}


# part_type, service, orderid, the request's other fields, the user's identity headers
FetchKey = tuple[str, str, str, bytes, tuple[tuple[str, str], ...]]
_sorted_json = msgspec.json.Encoder(order="sorted")


@dataclass
class OrderFetch:
    """One read of an order's content tags, then one upstream call for it."""

    fetched: asyncio.Future[Fetched]
    stored: dict[str, str] | None = None
    cache_available: bool = False
    issued_ms: int = 0


class PartService:
    def __init__(
        self,
        policy: PollingPolicy,
        tag_cache: TagCache,
        upstreams: Mapping[str, PartUpstreamClient],
        metrics: BffMetrics,
        *,
        coalesce: bool = True,
    ) -> None:
        self.policy = policy
        self.tag_cache = tag_cache
        self.upstreams = upstreams
        self.metrics = metrics
        self.coalesce = coalesce
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
    ) -> dict[str, Any]:
        """Exactly the rule's fields the upstream returned (an absent one means "delete it"),
        plus the new tag; or the order's error."""
        if fetched.body is not None:
            try:
                fields = self._cuts[endpoint.rule.url].cut(fetched.body)
            except msgspec.DecodeError:
                fetched = Fetched(FetchOutcome.STALE)
            else:
                self._count(endpoint, fetched.outcome)
                tag = encode_tag(endpoint.policy_version, content, issued_ms)
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
            str(endpoint.deprecated).lower(),
        ).inc()

    def _key(
        self,
        endpoint: PartEndpoint,
        orderid: str,
        other_fields: Mapping[str, Any],
        headers: Mapping[str, str],
    ) -> FetchKey:
        identity = tuple(sorted((k, v) for k, v in headers.items() if k != "X-Request-Id"))
        body = _sorted_json.encode(other_fields)
        return (endpoint.rule.part_type, endpoint.service, orderid, body, identity)

    async def fetch_parts(
        self,
        endpoint: PartEndpoint,
        orders: Sequence[tuple[str, str | None]],
        other_fields: Mapping[str, Any],
        headers: dict[str, str],
    ) -> list[dict[str, Any]]:
        """`orders` are (orderid, client tag). Each order's fetch is its content tags, then
        its upstream call; one that is already running for the same order, user and request
        is joined instead of repeated, so a client fetching several parts of an order at once
        costs the upstream one call."""
        self.count_request(endpoint)
        loop = asyncio.get_running_loop()
        fetches: list[OrderFetch] = []
        started: list[tuple[str, str | None, OrderFetch, FetchKey]] = []
        for orderid, client_tag in orders:
            key = self._key(endpoint, orderid, other_fields, headers)
            running = self._in_flight.get(key) if self.coalesce else None
            if running is None:
                running = OrderFetch(loop.create_future())
                if self.coalesce:
                    self._in_flight[key] = running
                started.append((orderid, client_tag, running, key))
            else:
                self.metrics.part_coalesced.labels(endpoint.service, endpoint.rule.part_name).inc()
            fetches.append(running)
        if started:
            # runs on its own: a request that goes away must not fail those that joined it
            task = asyncio.create_task(
                self._run(endpoint, started, other_fields, headers), name="part-fetch"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        results = await asyncio.gather(*(asyncio.shield(fetch.fetched) for fetch in fetches))
        sources = self.policy.services[endpoint.service].content_sources(
            endpoint.policy_version, endpoint.rule.part_name
        )
        parts = []
        for (orderid, _), fetch, fetched in zip(orders, fetches, results, strict=True):
            # unknown content (cache down, or none stored) never matches: refetched later
            content = part_content(sources, fetch.stored) if fetch.cache_available else None
            parts.append(self._part(endpoint, orderid, fetched, content, fetch.issued_ms))
        return parts

    async def _run(
        self,
        endpoint: PartEndpoint,
        started: list[tuple[str, str | None, OrderFetch, FetchKey]],
        other_fields: Mapping[str, Any],
        headers: dict[str, str],
    ) -> None:
        upstream = self.upstreams[endpoint.rule.part_type]
        try:
            # first the content tags (one batch read for the request), and only then the data
            keys = [OrderKey(endpoint.service, orderid) for orderid, _, _, _ in started]
            stored = await self.tag_cache.get(keys)
            issued_ms = int(time.time() * 1000)
            for order_key, (_, _, fetch, _) in zip(keys, started, strict=True):
                fetch.cache_available = stored is not None
                fetch.stored = stored.get(order_key) if stored is not None else None
                fetch.issued_ms = issued_ms

            async def one(orderid: str, client_tag: str | None, fetch: OrderFetch) -> None:
                body = {**other_fields, "orderid": orderid}
                if client_tag is not None:
                    body["tag"] = client_tag
                fetch.fetched.set_result(await upstream.fetch(body, headers))

            await asyncio.gather(*(one(o, t, f) for o, t, f, _ in started))
        finally:
            for _, _, fetch, key in started:
                if not fetch.fetched.done():
                    fetch.fetched.set_result(Fetched(FetchOutcome.STALE))
                if self._in_flight.get(key) is fetch:
                    del self._in_flight[key]

    async def fetch_route(
        self, endpoint: PartEndpoint, body: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        """The route part: taxiroute proxied for one order. It has no content tag (the
        client polls it by its own route rules), so its tag's content is unknown."""
        self.count_request(endpoint)
        orderid: str = body["orderid"]
        body = {name: value for name, value in body.items() if value is not None}
        fetched = await self.upstreams[endpoint.rule.part_type].fetch(body, headers)
        return self._part(endpoint, orderid, fetched, None, int(time.time() * 1000))


def parse_part_request(
    body: Mapping[str, Any], max_orders: int
) -> tuple[list[tuple[str, str | None]], dict[str, Any]]:
    """The orders (orderid, client tag) of a part request, and its other fields."""
    try:
        request = msgspec.convert(body, PartRequest)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"invalid request: {exc}", code="invalid_request") from exc
    if not 1 <= len(request.orders) <= max_orders:
        raise BadRequest(
            f"a part request takes 1 to {max_orders} orders, not {len(request.orders)}",
            code="bad_orders_count",
        )
    orderids = [order.orderid for order in request.orders]
    if len(set(orderids)) != len(orderids):
        raise BadRequest("an order is listed twice", code="duplicate_order")
    other = {name: value for name, value in body.items() if name != "orders"}
    return [(order.orderid, order.tag) for order in request.orders], other

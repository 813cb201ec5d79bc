"""The typed client of the order_tags service, used by the BFF and the emulator's features."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import aiohttp
import msgspec

from shared import wire
from shared.errors import OrderTagsRejected, OrderTagsUnavailable
from shared.http import RetryPolicy, UpstreamClient

T = TypeVar("T")


class OrderTagsClient(UpstreamClient):
    """Every failure (refused, slow, 5xx, garbage) surfaces as one `OrderTagsUnavailable`,
    because callers treat them all the same way: degrade."""

    _get_decoder = msgspec.json.Decoder(wire.TagsGetResponse)
    _write_decoder = msgspec.json.Decoder(wire.TagsWriteResponse)
    _delete_decoder = msgspec.json.Decoder(wire.TagsDeleteResponse)
    _bump_list_decoder = msgspec.json.Decoder(wire.ListBumpResponse)
    _keep_decoder = msgspec.json.Decoder(wire.ListsKeepResponse)

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        deadline_s: float = 0.05,
        retry: RetryPolicy | None = None,
        session: aiohttp.ClientSession | None = None,
        own_queue_allowance_s: float = 0.0,
    ) -> None:
        super().__init__(
            base_url,
            attempt_timeout_s=deadline_s,
            deadline_s=deadline_s,
            # only a refused connection is retried: a slow cache has already used the deadline
            retry=retry or RetryPolicy(attempts=2, retry_on_5xx=False, retry_on_timeout=False),
            session=session,
            headers={"Authorization": f"Bearer {token}"},
            own_queue_allowance_s=own_queue_allowance_s,
        )

    async def _call(
        self,
        path: str,
        request: msgspec.Struct,
        decoder: msgspec.json.Decoder[T],
        deadline_s: float | None,
    ) -> T:
        try:
            response = await self.post(path, wire.encode(request), deadline_s=deadline_s)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise OrderTagsUnavailable(f"order_tags {path}: {exc!r}") from exc
        if 400 <= response.status < 500:
            raise OrderTagsRejected(
                f"order_tags {path}: HTTP {response.status} {response.body[:200]!r}"
            )
        if response.status != 200:
            raise OrderTagsUnavailable(
                f"order_tags {path}: HTTP {response.status} {response.body[:200]!r}"
            )
        try:
            return decoder.decode(response.body)
        except msgspec.DecodeError as exc:
            raise OrderTagsUnavailable(f"order_tags {path}: bad response: {exc}") from exc

    async def get(
        self, orders: Sequence[wire.OrderKey], *, deadline_s: float | None = None
    ) -> dict[wire.OrderKey, dict[str, str] | None]:
        """Content tags of many orders in one call; `None` for an order with none stored."""
        if not orders:
            return {}
        result = await self._call(
            "/v1/tags/get", wire.TagsGetRequest(orders=list(orders)), self._get_decoder, deadline_s
        )
        return {wire.OrderKey(o.service, o.orderid): o.tags for o in result.orders}

    async def read(
        self,
        orders: Sequence[wire.OrderKey],
        lists: Sequence[wire.ListKey] = (),
        *,
        force: Sequence[wire.ForcedOrder] = (),
        force_per_minute: int = 0,
        deadline_s: float | None = None,
    ) -> wire.TagsGetResponse:
        """Order tags (with when each order's first tag was written), list tags (made when
        absent) with their kept answers, and which forced orders are within their budget, in
        one call and one Redis round trip."""
        request = wire.TagsGetRequest(
            orders=list(orders),
            lists=list(lists),
            force=list(force),
            force_per_minute=force_per_minute,
        )
        return await self._call("/v1/tags/get", request, self._get_decoder, deadline_s)

    async def bump_list(
        self, service: str, user_id: str, *, deadline_s: float | None = None
    ) -> str:
        """A new list tag for what `service`'s source lists for the user (an order sources
        calls it after every change of that list: data first, tag second)."""
        request = wire.ListBumpRequest(service, user_id)
        result = await self._call("/v1/lists/bump", request, self._bump_list_decoder, deadline_s)
        return result.tag

    async def keep_answers(
        self, answers: Sequence[wire.KeptAnswerOut], *, deadline_s: float | None = None
    ) -> None:
        """Keep sources' answers, each under the list tag read before its source was asked:
        one call (at most wire.MAX_LISTS answers, within the body limit)."""
        request = wire.ListsKeepOut(list(answers))
        await self._call("/v1/lists/keep_many", request, self._keep_decoder, deadline_s)

    async def set(
        self,
        service: str,
        orderid: str,
        tags: dict[str, str],
        *,
        only_if_absent: bool = False,
        user_id: str | None = None,
        deadline_s: float | None = None,
    ) -> dict[str, str]:
        """Write these parts; `user_id` on the write that creates the order says whose it is
        (a poll of that user keeps it for a grace while its source does not list it yet)."""
        request = wire.TagsSetRequest(service, orderid, tags, only_if_absent, user_id)
        result = await self._call("/v1/tags/set", request, self._write_decoder, deadline_s)
        return result.tags

    async def create(
        self,
        orders: Sequence[wire.OrderParts],
        *,
        deadline_s: float | None = None,
    ) -> dict[wire.OrderKey, dict[str, str]]:
        """New content tags for parts that have none, for many orders in one call (only where
        absent); every order's stored tags afterwards."""
        request = wire.TagsCreateRequest(orders=list(orders))
        result = await self._call("/v1/tags/create", request, self._get_decoder, deadline_s)
        return {wire.OrderKey(o.service, o.orderid): o.tags or {} for o in result.orders}

    async def bump(
        self, service: str, orderid: str, parts: Sequence[str], *, deadline_s: float | None = None
    ) -> dict[str, str]:
        request = wire.TagsBumpRequest(service, orderid, list(parts))
        result = await self._call("/v1/tags/bump", request, self._write_decoder, deadline_s)
        return result.tags

    async def delete(self, service: str, orderid: str, *, deadline_s: float | None = None) -> bool:
        request = wire.TagsDeleteRequest(service, orderid)
        result = await self._call("/v1/tags/delete", request, self._delete_decoder, deadline_s)
        return result.deleted

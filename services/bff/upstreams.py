"""The HTTP clients of the BFF's upstreams (the core's ports, `services.bff.ports`):

- an order source per service, with its own deadline and at most one retry on a 5xx or a
  connection error (a source that fails or misses its deadline is unavailable);
- a part upstream per part type (totw, eats or grocery details, taxiroute), one retry on a
  5xx, a timeout or a connection error and none on a 4xx; a fetch comes to the document, the
  order gone (`expired`) or a failure (`stale`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import msgspec

from services.bff.poll import Caller
from services.bff.ports import Fetched, FetchOutcome
from shared import wire
from shared.errors import ServiceUnavailable
from shared.http import CircuitOpenError, Protection, RetryPolicy, UpstreamClient, UpstreamResponse
from shared.logs import Sparse
from shared.upstream_wire import SourceKnownOrder, SourceRequest, SourceResponse

log = logging.getLogger("mlutp.upstreams")


class OrderSourceClient(UpstreamClient):
    _decoder = msgspec.json.Decoder(SourceResponse)

    def __init__(
        self,
        service: str,
        url: str,
        *,
        deadline_s: float,
        session: aiohttp.ClientSession | None = None,
        protection: Protection | None = None,
        own_queue_allowance_s: float = 0.0,
    ) -> None:
        super().__init__(
            url,
            session=session,
            attempt_timeout_s=deadline_s,
            deadline_s=deadline_s,
            # a timeout has used the deadline already: only fast failures are retried
            retry=RetryPolicy(attempts=2, retry_on_5xx=True, retry_on_timeout=False),
            protection=protection,
            own_queue_allowance_s=own_queue_allowance_s,
        )
        self.service = service
        self._warnings = Sparse()

    async def list_active(
        self,
        caller: Caller,
        known: Sequence[SourceKnownOrder] = (),
        at_least: str | None = None,
    ) -> SourceResponse | None:
        """The user's active orders, or None when the source is unavailable. The source is
        told the client's known orders of its service with their content tags, and the
        user's list tag read before the call."""
        request = SourceRequest(list(known), at_least)
        try:
            response = await self.post("", wire.encode(request), headers=caller.headers)
        except CircuitOpenError:
            return None  # counted by the protection's metrics, not logged
        except (TimeoutError, aiohttp.ClientError) as exc:
            self._warnings.warning(
                log, "order source unavailable", "unavailable", source=self.service, error=repr(exc)
            )
            return None
        if response.status != 200:
            self._warnings.warning(
                log, "order source failed", "failed", source=self.service, status=response.status
            )
            return None
        try:
            return self._decoder.decode(response.body)
        except msgspec.DecodeError as exc:
            self._warnings.warning(
                log, "order source answered garbage", "garbage", source=self.service, error=str(exc)
            )
            return None


class PartUpstreamClient(UpstreamClient):
    """One retry on a 5xx, a timeout or a connection error; none on a 4xx."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        deadline_s: float,
        session: aiohttp.ClientSession | None = None,
        protection: Protection | None = None,
    ) -> None:
        super().__init__(
            url,
            session=session,
            attempt_timeout_s=timeout_s,
            deadline_s=deadline_s,
            retry=RetryPolicy(attempts=2, retry_on_5xx=True, retry_on_timeout=True),
            protection=protection,
        )
        self._warnings = Sparse()

    async def fetch(self, body: Mapping[str, Any], caller: Caller) -> Fetched:
        try:
            response = await self.post("", wire.encode(body), headers=caller.headers)
        except CircuitOpenError:
            return Fetched(FetchOutcome.STALE)  # counted by the protection's metrics, not logged
        except (TimeoutError, aiohttp.ClientError) as exc:
            self._warnings.warning(
                log, "part upstream failed", "failed", url=self.base_url, error=repr(exc)
            )
            return Fetched(FetchOutcome.STALE)
        return self._outcome(response)

    def _outcome(self, response: UpstreamResponse) -> Fetched:
        if response.status == 404:
            return Fetched(FetchOutcome.EXPIRED)
        if response.status != 200:
            return Fetched(FetchOutcome.STALE)
        return Fetched(FetchOutcome.OK, response.body)

    async def pass_through(self, body: bytes, caller: Caller) -> UpstreamResponse:
        """The legacy call as it is: same body, same answer."""
        try:
            return await self.post("", body, headers=caller.headers)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ServiceUnavailable(
                f"the upstream did not answer: {exc!r}", code="upstream_unavailable"
            ) from exc

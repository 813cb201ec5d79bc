"""The upstreams of parts (totw, eats or grocery details, taxiroute) and what a fetch from
one comes to: the document, the order gone (`expired`), or a failure (`stale`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import aiohttp

from shared import wire
from shared.errors import ServiceUnavailable
from shared.http import CircuitOpenError, Protection, RetryPolicy, UpstreamClient, UpstreamResponse

log = logging.getLogger("mlutp.parts")


class FetchOutcome(StrEnum):
    OK = "ok"
    EXPIRED = "expired"  # the upstream does not know the order (for this user): it is gone
    STALE = "stale"  # the upstream failed; the client keeps what it has and retries


@dataclass(frozen=True)
class Fetched:
    outcome: FetchOutcome
    body: bytes | None = None


def error_part(orderid: str, outcome: FetchOutcome) -> dict[str, Any]:
    return {"orderid": orderid, "error": {"update_status": outcome.value}}


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

    async def fetch(self, body: Mapping[str, Any], headers: dict[str, str]) -> Fetched:
        try:
            response = await self.post("", wire.encode(body), headers=headers)
        except CircuitOpenError:
            return Fetched(FetchOutcome.STALE)  # counted by the protection's metrics, not logged
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

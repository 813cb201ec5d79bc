"""Order source clients: one per service, each with its own deadline and at most one retry
on a 5xx or a connection error. A source that fails or misses its deadline is unavailable."""

from __future__ import annotations

import logging

import aiohttp
import msgspec

from shared.http import CircuitOpenError, Protection, RetryPolicy, UpstreamClient
from shared.upstream_wire import SourceResponse

log = logging.getLogger("mlutp.sources")


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
    ) -> None:
        super().__init__(
            url,
            session=session,
            attempt_timeout_s=deadline_s,
            deadline_s=deadline_s,
            # a timeout has used the deadline already: only fast failures are retried
            retry=RetryPolicy(attempts=2, retry_on_5xx=True, retry_on_timeout=False),
            protection=protection,
        )
        self.service = service

    async def list_active(self, headers: dict[str, str]) -> SourceResponse | None:
        """The user's active orders, or None when the source is unavailable."""
        try:
            response = await self.post("", b"{}", headers=headers)
        except CircuitOpenError:
            return None  # counted by the protection's metrics, not logged
        except (TimeoutError, aiohttp.ClientError) as exc:
            log.warning(
                "order source unavailable", extra={"source": self.service, "error": repr(exc)}
            )
            return None
        if response.status != 200:
            log.warning(
                "order source failed", extra={"source": self.service, "status": response.status}
            )
            return None
        try:
            return self._decoder.decode(response.body)
        except msgspec.DecodeError as exc:
            log.warning(
                "order source answered garbage", extra={"source": self.service, "error": str(exc)}
            )
            return None

"""HTTP client plumbing for upstream calls: one session per client, explicit timeouts,
retries through aiohttp-retry, and an overall deadline per call."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
from aiohttp_retry import ExponentialRetry, RetryClient


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` counts the first try: 2 means at most one retry."""

    attempts: int = 2
    retry_on_5xx: bool = True
    retry_on_timeout: bool = True
    # a short pause: the retry has to fit inside the caller's deadline
    backoff_s: float = 0.01
    exceptions: tuple[type[Exception], ...] = field(default=(aiohttp.ClientConnectionError,))

    def options(self) -> ExponentialRetry:
        exceptions: set[type[Exception]] = set(self.exceptions)
        if self.retry_on_timeout:
            exceptions |= {asyncio.TimeoutError, aiohttp.ServerTimeoutError}
        return ExponentialRetry(
            attempts=self.attempts,
            start_timeout=self.backoff_s,
            factor=1.0,
            statuses=set(),
            exceptions=exceptions,
            retry_all_server_errors=self.retry_on_5xx,
        )


@dataclass(frozen=True)
class UpstreamResponse:
    status: int
    body: bytes
    headers: dict[str, str]


class UpstreamClient:
    """A base URL, one session and a retry policy. Subclasses add typed calls.

    Build it inside a running event loop (a `cleanup_ctx`), close it on the way out.
    """

    def __init__(
        self,
        base_url: str,
        *,
        attempt_timeout_s: float,
        deadline_s: float,
        retry: RetryPolicy,
        connection_limit: int = 200,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.deadline_s = deadline_s
        self._attempt_timeout = aiohttp.ClientTimeout(total=attempt_timeout_s)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connection_limit, ttl_dns_cache=300),
            timeout=self._attempt_timeout,
            headers=headers,
            raise_for_status=False,
        )
        self._retry_client = RetryClient(
            client_session=self._session, retry_options=retry.options()
        )

    async def close(self) -> None:
        await self._session.close()

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        headers: dict[str, str] | None = None,
        deadline_s: float | None = None,
    ) -> UpstreamResponse:
        """POST JSON; retries per the policy; raises TimeoutError past the deadline and
        aiohttp.ClientError when the upstream cannot be reached."""
        all_headers = {"Content-Type": "application/json"}
        if headers:
            all_headers.update(headers)
        async with asyncio.timeout(deadline_s or self.deadline_s):
            async with self._retry_client.post(
                self.base_url + path, data=body, headers=all_headers, timeout=self._attempt_timeout
            ) as response:
                payload = await response.read()
                return UpstreamResponse(response.status, payload, dict(response.headers))

    async def get_path(self, path: str, *, deadline_s: float | None = None) -> UpstreamResponse:
        async with asyncio.timeout(deadline_s or self.deadline_s):
            async with self._retry_client.get(
                self.base_url + path, timeout=self._attempt_timeout
            ) as response:
                payload = await response.read()
                return UpstreamResponse(response.status, payload, dict(response.headers))

"""The demo server's way to the services behind it: requests passed on as they are, for the
demo user. No retries here: the page's client retries, as a mobile client does, and the
demo must show failures, not hide them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from shared.errors import BadGateway
from shared.http import create_session

# request headers of the browser's that reach the services (the user id is the demo's own)
FORWARDED_REQUEST = ("Content-Type", "User-Agent", "Accept-Language", "X-Request-Id")
# response headers the page's client reads
FORWARDED_RESPONSE = (
    "Content-Type",
    "Retry-After",
    "X-Yataxi-Polling-Interval-Ms",
    "X-Mlutp-Wait",
)


@dataclass(frozen=True)
class Passed:
    status: int
    body: bytes
    headers: dict[str, str]


class DemoUpstreams:
    def __init__(self, user_id: str, timeout_s: float, session: aiohttp.ClientSession) -> None:
        self.user_id = user_id
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, connect=2.0)
        self.session = session

    @classmethod
    def create(cls, user_id: str, timeout_s: float) -> DemoUpstreams:
        return cls(user_id, timeout_s, create_session(connection_limit=100))

    async def close(self) -> None:
        await self.session.close()

    async def call(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Passed:
        """One request as the demo user; a service that does not answer is a 502."""
        sent = {name: headers[name] for name in FORWARDED_REQUEST if headers and name in headers}
        sent["X-Yandex-UID"] = self.user_id
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        try:
            async with self.session.request(
                method, url, data=body, headers=sent, timeout=self.timeout
            ) as response:
                data = await response.read()
                kept = {
                    name: response.headers[name]
                    for name in FORWARDED_RESPONSE
                    if name in response.headers
                }
                return Passed(response.status, data, kept)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise BadGateway(f"{url} did not answer: {exc!r}") from exc

"""The demo server's way to the services behind it: requests passed on as they are, for the
demo user. No retries here: the page's client retries, as a mobile client does, and the
demo must show failures, not hide them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import aiohttp

from shared.errors import BadGateway, Overloaded
from shared.http import create_session

# connections (and requests in progress) of each kind: one user's page needs a handful
POOL_SIZE = 32
# request headers of the browser's that reach the services (the user id is the demo's own;
# the answer_tag a poll sends back is in its body, which passes as it is)
FORWARDED_REQUEST = ("Content-Type", "User-Agent", "Accept-Language", "X-Request-Id")
# response headers the page's client reads
FORWARDED_RESPONSE = ("Content-Type", "Retry-After", "X-Yataxi-Polling-Interval-Ms", "X-Mlutp-Wait")


@dataclass(frozen=True)
class Passed:
    status: int
    body: bytes
    headers: dict[str, str]


class Kind(StrEnum):
    """What a request is: each kind has a pool of its own, so held polls never take the
    connections the page's other requests need."""

    POLL = "poll"  # orders/state and launch: a poll may be held up to 25 s
    OTHER = "other"  # parts, the emulator's control and feature calls, traffic


class DemoUpstreams:
    def __init__(
        self, user_id: str, timeout_s: float, sessions: dict[Kind, aiohttp.ClientSession]
    ) -> None:
        self.user_id = user_id
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, connect=2.0)
        self.sessions = sessions
        self.in_flight = dict.fromkeys(Kind, 0)

    @classmethod
    def create(cls, user_id: str, timeout_s: float) -> DemoUpstreams:
        sessions = {kind: create_session(connection_limit=POOL_SIZE) for kind in Kind}
        return cls(user_id, timeout_s, sessions)

    async def close(self) -> None:
        for session in self.sessions.values():
            await session.close()

    async def call(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        kind: Kind = Kind.OTHER,
    ) -> Passed:
        """One request as the demo user; a service that does not answer is a 502. Past its
        pool's size a request is a 503 at once, instead of queueing behind held polls."""
        if self.in_flight[kind] >= POOL_SIZE:
            raise Overloaded(
                f"{POOL_SIZE} {kind.value} requests in progress through the demo",
                headers={"Retry-After": "1"},
            )
        self.in_flight[kind] += 1
        try:
            return await self._call(self.sessions[kind], method, url, body, headers)
        finally:
            self.in_flight[kind] -= 1

    async def _call(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> Passed:
        sent = {name: headers[name] for name in FORWARDED_REQUEST if headers and name in headers}
        sent["X-Yandex-UID"] = self.user_id
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        try:
            async with session.request(
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

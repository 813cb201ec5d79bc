"""HTTP client plumbing for upstream calls: one session per client, explicit timeouts,
retries through aiohttp-retry, and an overall deadline per call."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web
from aiohttp_retry import ExponentialRetry, RetryClient

from shared.protocol.circuit import CircuitBreaker
from shared.protocol.retry_budget import RetryBudget


class CircuitOpenError(aiohttp.ClientConnectionError):
    """No call was made: the upstream's circuit is open after failures in a row."""


class _BudgetedRetry(ExponentialRetry):
    """aiohttp-retry's exponential retry that tells the budget each time it retries."""

    def __init__(self, on_retry: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_retry = on_retry

    def get_timeout(self, attempt: int, response: aiohttp.ClientResponse | None = None) -> float:
        self._on_retry()
        return super().get_timeout(attempt, response)


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` counts the first try: 2 means at most one retry."""

    attempts: int = 2
    retry_on_5xx: bool = True
    retry_on_timeout: bool = True
    # a short pause: the retry has to fit inside the caller's deadline
    backoff_s: float = 0.01
    exceptions: tuple[type[Exception], ...] = field(default=(aiohttp.ClientConnectionError,))

    def options(self, on_retry: Callable[[], None] | None = None) -> ExponentialRetry:
        exceptions: set[type[Exception]] = set(self.exceptions)
        if self.retry_on_timeout:
            exceptions |= {asyncio.TimeoutError, aiohttp.ServerTimeoutError}
        return _BudgetedRetry(
            on_retry or (lambda: None),
            attempts=self.attempts,
            start_timeout=self.backoff_s,
            factor=1.0,
            statuses=set(),
            exceptions=exceptions,
            retry_all_server_errors=self.retry_on_5xx,
        )


# what Protection.admit decides for a call: refused (the circuit is open), a call, or the
# half-open circuit's one probe
Admission = Literal["refused", "call", "probe"]


@dataclass
class Protection:
    """What keeps clients from multiplying load on a failing upstream: a circuit breaker
    (failures in a row open it; then one probe at a time) and a retry budget. `on_event`
    hears "call" (a call went out, its retry not counted), "retry", "retry_over_budget" and
    "circuit_open" (a call not made), for metrics."""

    circuit: CircuitBreaker = field(default_factory=lambda: CircuitBreaker(10, 2.0))
    retry_budget: RetryBudget = field(default_factory=RetryBudget)
    on_event: Callable[[str], None] = lambda event: None
    clock: Callable[[], float] = time.monotonic
    # the half-open circuit's probe in flight: its verdict (True: the upstream answered)
    _probe: asyncio.Future[bool] | None = field(default=None, init=False, repr=False)

    async def admit(self, wait_s: float) -> Admission:
        """Whether a call may go out now, and whether it is the circuit's probe. While the
        probe is out, a call waits for its verdict (at most `wait_s`) instead of failing at
        once: the calls made together with the probe (an app's parts of two orders of one
        upstream) go out once it has answered, and none goes to an upstream the probe found
        still failing."""
        admission = self._allowed()
        probe = self._probe
        if admission != "refused" or probe is None:
            return admission
        try:
            answered = await asyncio.wait_for(asyncio.shield(probe), wait_s)
        except TimeoutError:
            return "refused"
        return self._allowed() if answered else "refused"

    def _allowed(self) -> Admission:
        if not self.circuit.allow(self.clock()):
            return "refused"
        if not self.circuit.probing:
            return "call"
        self._probe = asyncio.get_running_loop().create_future()
        return "probe"

    def verdict(self, admission: Admission, answered: bool) -> None:
        """A call ended: if it was the probe, wake the calls waiting on it."""
        if admission != "probe":
            return
        probe, self._probe = self._probe, None
        if probe is not None and not probe.done():
            probe.set_result(answered)


@dataclass(frozen=True)
class UpstreamResponse:
    status: int
    body: bytes
    headers: dict[str, str]


def create_session(connection_limit: int = 500) -> aiohttp.ClientSession:
    """The one HTTP session of an app: a shared connection pool for all its upstream clients.
    Timeouts are per client and per call, so none is set here."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connection_limit, ttl_dns_cache=300),
        raise_for_status=False,
    )


HTTP_SESSION = web.AppKey("http_session", aiohttp.ClientSession)


async def http_session_ctx(app: web.Application) -> AsyncIterator[None]:
    """A `cleanup_ctx`: opens the app's session; clients built after it use it."""
    app[HTTP_SESSION] = create_session()
    yield
    await app[HTTP_SESSION].close()


# a timer firing later than this was held up by the process's own work
_LATE_S = 0.001


@contextlib.asynccontextmanager
async def upstream_deadline(deadline_s: float, own_queue_allowance_s: float) -> AsyncIterator[None]:
    """`asyncio.timeout(deadline_s)`, except that when its timer fires late (the event loop was
    busy with this process's own work) it is moved on by as much, up to the allowance in all.
    An answer that arrived in time but waits in the socket behind the process's own queue is
    read before the deadline is judged: a burst the process admitted does not time out its
    upstreams on itself and open their circuits. With the loop idle the deadline is exact."""
    if own_queue_allowance_s <= 0:
        async with asyncio.timeout(deadline_s):
            yield
        return
    loop = asyncio.get_running_loop()
    allowance = own_queue_allowance_s
    timeout = asyncio.timeout(None)
    # the timer now (one at a time)
    timers: list[asyncio.TimerHandle] = []

    def judge(due: float) -> None:
        nonlocal allowance
        late = loop.time() - due
        if late > _LATE_S and allowance > 0:
            extra = min(late, allowance)
            allowance -= extra
            moved_to = loop.time() + extra
            timers[0] = loop.call_at(moved_to, judge, moved_to)
        else:
            timeout.reschedule(loop.time())

    due = loop.time() + deadline_s
    timers.append(loop.call_at(due, judge, due))
    try:
        async with timeout:
            yield
    finally:
        timers[0].cancel()


class UpstreamClient:
    """A base URL, a retry policy and explicit timeouts over a session. Subclasses add typed
    calls. Given the app's session it shares that pool; without one it opens (and on `close`
    closes) its own.
    """

    def __init__(
        self,
        base_url: str,
        *,
        attempt_timeout_s: float,
        deadline_s: float,
        retry: RetryPolicy,
        session: aiohttp.ClientSession | None = None,
        headers: dict[str, str] | None = None,
        protection: Protection | None = None,
        own_queue_allowance_s: float = 0.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.deadline_s = deadline_s
        # how much longer than its deadline a call may last while this process's own event
        # loop is busy (see `upstream_deadline`); the deadline alone judges the upstream, so
        # the attempt's own timeout leaves room for it
        self.own_queue_allowance_s = own_queue_allowance_s
        self._attempt_timeout = aiohttp.ClientTimeout(
            total=attempt_timeout_s + own_queue_allowance_s
        )
        self._owns_session = session is None
        self._session = session or create_session()
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self.protection = protection
        self._retry_client = RetryClient(
            client_session=self._session, retry_options=retry.options(self._retried)
        )
        # past the retry budget a call is made once
        self._no_retry = RetryPolicy(attempts=1).options()

    def _retried(self) -> None:
        if self.protection is not None:
            self.protection.retry_budget.retry(self.protection.clock())
            self.protection.on_event("retry")

    async def close(self) -> None:
        if self._owns_session:
            await self._session.close()

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        deadline_s: float | None = None,
    ) -> UpstreamResponse:
        """POST JSON; retries per the policy; raises TimeoutError past the deadline and
        aiohttp.ClientError when the upstream cannot be reached."""
        protection = self.protection
        if protection is None:
            return await self._post(path, body, headers, deadline_s, None)
        deadline = deadline_s or self.deadline_s
        started = time.monotonic()
        # a call waiting on the circuit's probe waits at most half its deadline, and has the
        # rest for itself: the whole call, the wait included, ends by its deadline
        admission = await protection.admit(deadline / 2)
        if admission == "refused":
            protection.on_event("circuit_open")
            raise CircuitOpenError(f"{self.base_url}: circuit open")
        deadline_s = deadline - (time.monotonic() - started)
        now = protection.clock()
        retry_options = None
        if not protection.retry_budget.can_retry(now):
            protection.on_event("retry_over_budget")
            retry_options = self._no_retry
        protection.retry_budget.call(now)
        protection.on_event("call")
        try:
            response = await self._post(path, body, headers, deadline_s, retry_options)
        except (TimeoutError, aiohttp.ClientError):
            protection.circuit.failure(protection.clock())
            protection.verdict(admission, False)
            raise
        except BaseException:
            protection.circuit.abandon()
            protection.verdict(admission, False)
            raise
        if response.status >= 500:
            protection.circuit.failure(protection.clock())
            protection.verdict(admission, False)
        else:
            protection.circuit.success()
            protection.verdict(admission, True)
        return response

    async def _post(
        self,
        path: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        deadline_s: float | None,
        retry_options: ExponentialRetry | None,
    ) -> UpstreamResponse:
        all_headers = {**self._headers, **headers} if headers else self._headers
        deadline = upstream_deadline(deadline_s or self.deadline_s, self.own_queue_allowance_s)
        async with (
            deadline,
            self._retry_client.post(
                self.base_url + path,
                data=body,
                headers=all_headers,
                timeout=self._attempt_timeout,
                retry_options=retry_options,
            ) as response,
        ):
            payload = await response.read()
            return UpstreamResponse(response.status, payload, dict(response.headers))

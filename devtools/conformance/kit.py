"""What a scenario works with: the stack (its emulator, its Redis, its policy files), the
recording pass-through, the client under test and a user of the scenario's own; and the looks
at the exchanges scenarios share."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from devtools.conformance.clients import ClientUnderTest
from devtools.conformance.recording import Exchange, Recorder
from devtools.stack import Stack
from shared.policy import PollingType, load_policy

# how long a scenario waits for the client to do what it must (the kit's intervals are short)
PATIENCE_S = 20.0
# the services a policy deploy restarts: the ones that serve the policy to apps
# launch first: once a poll (orders_state) tells a client of a new version, the launch it
# then makes must be served by the new policy, not meet a launch still restarting
POLICY_SERVICES = ("launch", "orders_state")


@dataclass
class Kit:
    session: aiohttp.ClientSession
    stack: Stack
    recorder: Recorder
    client: ClientUnderTest
    user: str
    # the rollout's policy files, by stage (devtools.rollout); the stack starts on `announcing`
    policy_paths: dict[str, Path]
    # run by the runner once the client has stopped: what a scenario changed is put back
    after: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @functools.cached_property
    def route_urls(self) -> dict[str, str]:
        """Read once: the scenarios' predicates ask on every exchange recorded."""
        return route_urls(self.policy_paths.values())

    @property
    def emulator_url(self) -> str:
        return self.stack.url("emulator")

    def exchanges(self) -> list[Exchange]:
        return self.recorder.of(self.user)

    async def until(
        self, what: str, done: Callable[[list[Exchange]], bool], patience_s: float = PATIENCE_S
    ) -> None:
        """Until the client's exchanges show `done`, at most `patience_s`: TimeoutError naming
        `what` otherwise."""
        try:
            async with asyncio.timeout(patience_s):
                await self.recorder.until(lambda: done(self.exchanges()))
        except TimeoutError:
            raise TimeoutError(f"the client did not {what} within {patience_s:.0f} s") from None

    async def shown(self, orderid: str, status: str) -> float | None:
        """When the app's view first showed the order in this status (None: the kit cannot
        see this app's view); TimeoutError if it did not within the patience."""
        try:
            async with asyncio.timeout(PATIENCE_S):
                return await self.client.wait_shown(orderid, status)
        except TimeoutError:
            raise TimeoutError(
                f"the client's view did not show {orderid} {status} within {PATIENCE_S:.0f} s"
            ) from None

    async def emulator(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        async with self.session.post(f"{self.emulator_url}{path}", json=body or {}) as r:
            answer: dict[str, Any] = await r.json()
            if r.status != 200:
                raise RuntimeError(f"emulator {path}: {r.status} {answer}")
            return answer

    async def create_order(self, service: str = "taxi", status: str | None = None) -> str:
        body = {"user_id": self.user, "service": service, **({"status": status} if status else {})}
        orderid: str = (await self.emulator("/emulator/v1/orders", body))["orderid"]
        return orderid

    async def advance(self, orderid: str, service: str = "taxi") -> None:
        await self.emulator(f"/emulator/v1/orders/{service}/{orderid}/advance")

    async def fault(self, target: str, mode: str, delay_ms: int = 0) -> None:
        await self.emulator(
            "/emulator/v1/faults", {"target": target, "mode": mode, "delay_ms": delay_ms}
        )

    async def deploy_policy(self, stage: str) -> None:
        """The services that serve the policy restarted on the rollout's `stage` file."""
        for name in POLICY_SERVICES:
            await self.stack.restart(name, {"MLUTP_POLICY_PATH": str(self.policy_paths[stage])})


def route_urls(policy_paths: Iterable[Path]) -> dict[str, str]:
    """The url of every route rule (polled by its own rule, not by need_request) these policy
    files serve → its part name."""
    return {
        endpoint.rule.url: endpoint.rule.part_name
        for path in policy_paths
        for endpoint in load_policy(path).endpoints
        if endpoint.rule.polling_type == PollingType.ROUTE_DISTANCE_DEPENDED
    }


def polls_after(exchanges: Sequence[Exchange], at: float) -> list[Exchange]:
    return [e for e in exchanges if e.kind == "poll" and e.at > at]


def fetched(exchanges: Sequence[Exchange], orderid: str, part: str, after: float = 0.0) -> bool:
    return bool(fetches(exchanges, orderid, part, after))


def asked(
    exchanges: Sequence[Exchange], orderid: str, part: str, after: float = 0.0
) -> list[Exchange]:
    """The part's requests for the order after `after`, answered well or not."""
    return [
        e
        for e in exchanges
        if e.kind == "part"
        and e.at > after
        and e.path.endswith(f"/{part}")
        and any(o.get("orderid") == orderid for o in e.request.get("orders", []))
    ]


def fetches(
    exchanges: Sequence[Exchange], orderid: str, part: str, after: float = 0.0
) -> list[Exchange]:
    """The part's fetches of the order that came back with its data, after `after`."""
    return [
        e
        for e in asked(exchanges, orderid, part, after)
        if e.status == 200
        and any(
            o.get("orderid") == orderid and "error" not in o
            for o in (e.answer or {}).get("orders", [])
        )
    ]


def state_orders(exchange: Exchange) -> list[dict[str, Any]]:
    """The orders of a launch's or a poll's answer."""
    if exchange.kind not in ("poll", "launch") or exchange.answer is None:
        return []
    answer = exchange.answer.get("mlutp_orders_state", exchange.answer)
    orders: list[dict[str, Any]] = answer.get("orders", [])
    return orders


def shown(exchanges: Sequence[Exchange], orderid: str, status: str | None = None) -> bool:
    return any(
        order.get("orderid") == orderid and (status is None or order["status"] == status)
        for e in exchanges
        for order in state_orders(e)
    )


async def caught_up(kit: Kit, orderid: str, required_part: str = "fast_info") -> None:
    """Until the client holds the order's required part (taxi's `fast_info`; eats' and
    grocery's `full_info`) and has polled once more."""
    await kit.until(
        f"fetch {required_part} of {orderid}",
        lambda ex: (
            fetched(ex, orderid, required_part)
            or any(e.kind == "launch" and shown([e], orderid) for e in ex)
        ),
    )
    started = time.monotonic()
    await kit.until("poll again", lambda ex: len(polls_after(ex, started)) >= 1)

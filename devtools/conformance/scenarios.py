"""The scenarios: each makes the stack do one thing the contract speaks of, for a user of its
own, while the client under test runs, and waits (bounded) until the client has done what
follows from it. What a scenario finds wrong beyond the general checks, it returns in words."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from devtools.conformance.clients import ClientUnderTest
from devtools.conformance.recording import Exchange, Recorder

# how long a scenario waits for the client to do what it must (the kit's intervals are short)
PATIENCE_S = 20.0


@dataclass
class Kit:
    session: aiohttp.ClientSession
    emulator_url: str
    recorder: Recorder
    client: ClientUnderTest
    user: str

    def exchanges(self) -> list[Exchange]:
        return self.recorder.of(self.user)

    async def until(self, what: str, done: Callable[[list[Exchange]], bool]) -> None:
        """Until the client's exchanges show `done`, at most PATIENCE_S: TimeoutError naming
        `what` otherwise."""
        try:
            async with asyncio.timeout(PATIENCE_S):
                await self.recorder.until(lambda: done(self.exchanges()))
        except TimeoutError:
            raise TimeoutError(f"the client did not {what} within {PATIENCE_S:.0f} s") from None

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

    async def fault(self, target: str, mode: str, delay_ms: int = 0) -> None:
        await self.emulator(
            "/emulator/v1/faults", {"target": target, "mode": mode, "delay_ms": delay_ms}
        )


def _polls_after(exchanges: Sequence[Exchange], at: float) -> list[Exchange]:
    return [e for e in exchanges if e.kind == "poll" and e.at > at]


def _fetched(exchanges: Sequence[Exchange], orderid: str, part: str, after: float = 0.0) -> bool:
    return any(
        e.kind == "part"
        and e.at > after
        and e.path.endswith(f"/{part}")
        and any(o.get("orderid") == orderid for o in e.request.get("orders", []))
        and e.status == 200
        and any(
            o.get("orderid") == orderid and "error" not in o
            for o in (e.answer or {}).get("orders", [])
        )
        for e in exchanges
    )


def _shown(exchanges: Sequence[Exchange], orderid: str, status: str | None = None) -> bool:
    for e in exchanges:
        if e.kind not in ("poll", "launch") or e.answer is None:
            continue
        answer = e.answer.get("mlutp_orders_state", e.answer)
        for order in answer.get("orders", []):
            if order.get("orderid") == orderid and (status is None or order["status"] == status):
                return True
    return False


async def caught_up(kit: Kit, orderid: str) -> None:
    await kit.until(
        f"fetch fast_info of {orderid}",
        lambda ex: (
            _fetched(ex, orderid, "fast_info")
            or any(e.kind == "launch" and _shown([e], orderid) for e in ex)
        ),
    )
    started = time.monotonic()
    await kit.until("poll again", lambda ex: len(_polls_after(ex, started)) >= 1)


async def new_order(kit: Kit) -> list[str]:
    """An order made elsewhere appears, and its parts are fetched."""
    await kit.until("launch", lambda ex: any(e.kind == "launch" for e in ex))
    orderid = await kit.create_order(status="driving")
    await kit.until(f"show {orderid}", lambda ex: _shown(ex, orderid))
    await kit.until(f"fetch fast_info of {orderid}", lambda ex: _fetched(ex, orderid, "fast_info"))
    return []


async def status_change(kit: Kit) -> list[str]:
    """A status change is polled for and its required part fetched."""
    orderid = await kit.create_order(status="searching")
    await caught_up(kit, orderid)
    changed = time.monotonic()
    await kit.emulator(f"/emulator/v1/orders/taxi/{orderid}/advance")
    await kit.until(
        "fetch fast_info after the change",
        lambda ex: _fetched(ex, orderid, "fast_info", changed),
    )
    return []


async def part_error_and_backoff(kit: Kit) -> list[str]:
    """A part that fails is retried with backoff, not in a tight loop, and fetched once it
    works again."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    await kit.fault("totw", "error500")
    broke = time.monotonic()
    try:
        await kit.emulator(
            f"/emulator/v1/orders/taxi/{orderid}/change", {"fields": {"comment": "conformance"}}
        )
        await kit.until(
            "ask for the failing part twice",
            lambda ex: (
                sum(
                    1
                    for e in ex
                    if e.kind == "part" and e.at > broke and "rarely_changed" in e.path
                )
                >= 2
            ),
        )
    finally:
        await kit.fault("totw", "ok")
    mended = time.monotonic()
    await kit.until(
        "fetch the part once it works again",
        lambda ex: _fetched(ex, orderid, "rarely_changed", mended),
    )
    exchanges = [e for e in kit.exchanges() if broke < e.at < mended]
    tries = [e for e in exchanges if e.kind == "part" and "rarely_changed" in e.path]
    polls = [e for e in exchanges if e.kind == "poll"]
    if len(tries) > len(polls) + 1:
        return [f"{len(tries)} tries of a failing part in {len(polls)} polls: no backoff"]
    return []


async def source_down(kit: Kit) -> list[str]:
    """A source down: its order comes back stale and the client keeps it, with its echo."""
    orderid = await kit.create_order("eats")
    await caught_up(kit, orderid)
    await kit.fault("source:eats", "down")
    try:
        # the list changes while its source is down: the source is asked, and fails
        await kit.emulator(f"/emulator/v1/orders/eats/{orderid}/advance")
        went_stale = time.monotonic()

        def stale_then_polled(ex: list[Exchange]) -> bool:
            stale = [
                e
                for e in ex
                if e.kind == "poll"
                and e.at > went_stale
                and e.answer is not None
                and any(o.get("update_status") == "stale" for o in e.answer.get("orders", []))
            ]
            return bool(stale) and len(_polls_after(ex, stale[0].at)) >= 1

        await kit.until("poll again after a stale answer", stale_then_polled)
    finally:
        await kit.fault("source:eats", "ok")
    return []


async def retry_after(kit: Kit) -> list[str]:
    """A 503 with Retry-After: the client comes back no sooner."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    kit.recorder.shed_polls, kit.recorder.retry_after_s = 1, 2
    await kit.until(
        "poll again after a 503",
        lambda ex: any(
            e.status == 503 and len(_polls_after(ex, e.at)) >= 1 for e in ex if e.kind == "poll"
        ),
    )
    return []


async def app_restart(kit: Kit) -> list[str]:
    """A restarted app launches with the orders and tags it kept: nothing unchanged is
    fetched again."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    await kit.client.restart()
    restarted = time.monotonic()
    await kit.until(
        "launch and poll after the restart",
        lambda ex: (
            any(e.kind == "launch" and e.at > restarted for e in ex)
            and len(_polls_after(ex, restarted)) >= 1
        ),
    )
    after = [e for e in kit.exchanges() if e.at > restarted]
    launch = next(e for e in after if e.kind == "launch")
    problems = []
    known = {k.get("orderid"): k for k in launch.request.get("known_orders", [])}
    if not known.get(orderid, {}).get("tags"):
        problems.append("the launch after a restart named no tags it had kept")
    parts = [e for e in after if e.kind == "part"]
    if parts:
        problems.append(f"{len(parts)} part requests after a restart with nothing changed")
    return problems


async def user_change(kit: Kit) -> list[str]:
    """A user change after another device changed the same field: a version conflict, caught
    up and retried once; then `force` until a part shows the change, and no longer."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    # another device first: the app's version is now one behind
    path = f"/emulator/v1/features/taxi/{orderid}/comment"
    async with kit.session.post(
        f"{kit.emulator_url}{path}",
        json={"value": "from another device", "version": 1},
        headers={"X-Yandex-UID": kit.user},
    ) as r:
        if r.status != 200:
            raise RuntimeError(f"the other device's change: {r.status} {await r.text()}")
    started = time.monotonic()
    await kit.client.change("taxi", orderid, "comment", "from the app")

    def seen_then_polled(ex: list[Exchange]) -> bool:
        changed = [e for e in ex if e.kind == "feature" and e.at > started and e.status == 200]
        if not changed:
            return False
        version = (changed[-1].answer or {}).get("version", 0)
        shown = [
            e
            for e in ex
            if e.kind == "part"
            and e.at > changed[-1].at
            and any(o.get("version", 0) >= version for o in (e.answer or {}).get("orders", []))
        ]
        return bool(shown) and len(_polls_after(ex, shown[0].at)) >= 1

    await kit.until("see its change and poll without force", seen_then_polled)
    tries = [e for e in kit.exchanges() if e.kind == "feature" and e.at > started]
    statuses = [e.status for e in tries]
    if statuses != [409, 200]:
        return [f"the change was sent {len(tries)} times ({statuses}); a conflict retries once"]
    return []


Scenario = Callable[[Kit], Awaitable[list[str]]]
SCENARIOS: dict[str, Scenario] = {
    "a new order": new_order,
    "a status change": status_change,
    "a part error and its backoff": part_error_and_backoff,
    "a source down: stale, echo": source_down,
    "a 503 with Retry-After": retry_after,
    "an app restart": app_restart,
    "a user change: conflict, force until seen": user_change,
}

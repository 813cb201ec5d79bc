"""Scenarios of an order's ordinary life: it appears, its status changes, its parts land (one
slow, one failing), and its route is polled by the car's distance."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

from devtools.conformance.kit import (
    Kit,
    asked,
    caught_up,
    fetched,
    fetches,
    polls_after,
    shown,
    state_orders,
)
from devtools.conformance.recording import Exchange

# a view may follow the part it shows by this much (the client's own work, the kit's clock)
VIEW_SLACK_S = 0.5
# the slow upstream's delay: longer than the BFF's part deadline, so the part comes back late
# (an error, after its retry) well after the required one
SLOW_UPSTREAM_MS = 3000
# the required part's upstream, slowed within the deadline: it lands, late
LATE_REQUIRED_MS = 700


async def new_order(kit: Kit) -> list[str]:
    """An order made elsewhere appears, and its parts are fetched."""
    await kit.until("launch", lambda ex: any(e.kind == "launch" for e in ex))
    orderid = await kit.create_order(status="driving")
    await kit.until(f"show {orderid}", lambda ex: shown(ex, orderid))
    await kit.until(f"fetch fast_info of {orderid}", lambda ex: fetched(ex, orderid, "fast_info"))
    return []


async def status_change(kit: Kit) -> list[str]:
    """A status change is polled for and its required part fetched."""
    orderid = await kit.create_order(status="searching")
    await caught_up(kit, orderid)
    changed = time.monotonic()
    await kit.advance(orderid)
    await kit.until(
        "fetch fast_info after the change",
        lambda ex: fetched(ex, orderid, "fast_info", changed),
    )
    return []


async def parts_one_slow(kit: Kit) -> list[str]:
    """A status change while the non-required `slow` part changes too, its upstream 3 s late:
    the view shows the new status once the required part lands, not when the slow one does.
    Then the required part itself late: the view waits for it, not showing the poll's status
    before its data."""
    orderid = await kit.create_order(status="searching")
    await caught_up(kit, orderid)
    problems = []
    await kit.fault("part:orderperformerinfo", "slow", SLOW_UPSTREAM_MS)
    try:
        changed = time.monotonic()
        fields = {"orderperformerinfo": {"name": "conformance", "rating": "4.9"}}
        await kit.emulator(f"/emulator/v1/orders/taxi/{orderid}/change", {"fields": fields})
        await kit.advance(orderid)
        await kit.until(
            "fetch fast_info after the change",
            lambda ex: _landed(ex, orderid, "driving", changed) is not None,
        )
        view_at = await kit.shown(orderid, "driving")
        await kit.until(
            "ask for the slow part", lambda ex: bool(asked(ex, orderid, "slow", changed))
        )
    finally:
        await kit.fault("part:orderperformerinfo", "ok")
    exchanges = kit.exchanges()
    landed = _landed(exchanges, orderid, "driving", changed)
    assert landed is not None
    slow = asked(exchanges, orderid, "slow", changed)[0]
    if view_at is not None and view_at > landed + VIEW_SLACK_S:
        problems.append(
            f"the new status showed {view_at - landed:.1f} s after its required part landed "
            f"(the slow part came {slow.answered - landed:.1f} s after it): the view waited "
            "for a part that does not hold it"
        )

    # the required part's own upstream, the order core, late
    await kit.fault("part:order_core", "slow", LATE_REQUIRED_MS)
    try:
        changed = time.monotonic()
        await kit.advance(orderid)
        await kit.until(
            "fetch fast_info after the change",
            lambda ex: _landed(ex, orderid, "waiting", changed) is not None,
        )
        view_at = await kit.shown(orderid, "waiting")
    finally:
        await kit.fault("part:order_core", "ok")
    landed = _landed(kit.exchanges(), orderid, "waiting", changed)
    assert landed is not None
    if view_at is not None and view_at < landed - 0.05:
        problems.append(
            f"the new status showed {landed - view_at:.2f} s before its required part landed: "
            "the view changed before the part that holds it"
        )
    return problems


def _landed(exchanges: Sequence[Exchange], orderid: str, status: str, after: float) -> float | None:
    """When the client had all it needs to show the order in this status: the first answer
    saying so, and the required part it named (fetched after it); None: not yet."""
    said = next((e for e in exchanges if e.at > after and shown([e], orderid, status)), None)
    if said is None:
        return None
    named = next(o for o in state_orders(said) if o.get("orderid") == orderid)
    if "fast_info" not in named.get("need_request", []):
        return said.answered
    required = fetches(exchanges, orderid, "fast_info", said.at)
    return required[0].answered if required else None


async def part_error_and_backoff(kit: Kit) -> list[str]:
    """A part that fails is retried with backoff, not in a tight loop, and fetched once it
    works again."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    # rarely_changed's own upstream, the order's settings service
    await kit.fault("part:order_settings", "error500")
    broke = time.monotonic()
    try:
        await kit.emulator(
            f"/emulator/v1/orders/taxi/{orderid}/change", {"fields": {"comment": "conformance"}}
        )
        await kit.until(
            "ask for the failing part twice",
            lambda ex: len(asked(ex, orderid, "rarely_changed", broke)) >= 2,
        )
    finally:
        await kit.fault("part:order_settings", "ok")
    mended = time.monotonic()
    await kit.until(
        "fetch the part once it works again",
        lambda ex: fetched(ex, orderid, "rarely_changed", mended),
    )
    exchanges = [e for e in kit.exchanges() if broke < e.at < mended]
    tries = [e for e in exchanges if e.kind == "part" and "rarely_changed" in e.path]
    polls = [e for e in exchanges if e.kind == "poll"]
    if len(tries) > len(polls) + 1:
        return [f"{len(tries)} tries of a failing part in {len(polls)} polls: no backoff"]
    return []


# where the kit puts the car: far (a rare route poll is enough) and close (a frequent one)
FAR_M, CLOSE_M = 5_000, 300


def _routes(kit: Kit, orderid: str, after: float = 0.0) -> list[Exchange]:
    urls = kit.route_urls
    return [
        e
        for e in kit.exchanges()
        if e.path in urls and e.at > after and e.request.get("orderid") == orderid
    ]


def _route_gap(kit: Kit, orderid: str, after: float, far: bool) -> float | None:
    """The gap after the first route answer (after `after`) that put the car far (or close),
    to the route request that followed it."""
    routes = _routes(kit, orderid, after)
    for this, following in itertools.pairwise(routes):
        distance = (this.answer or {}).get("distance_left_m")
        if isinstance(distance, int) and (distance >= FAR_M - 1 if far else distance <= CLOSE_M):
            return following.at - this.at
    return None


async def route_by_distance(kit: Kit) -> list[str]:
    """The route is polled by its own rule, not by need_request: less often while the car is
    far, more often once it is close, with the request old apps sent to taxiroute; and not at
    all once the trip is over."""
    gaps: dict[bool, float] = {}
    orderid = ""
    for far, distance_m in ((True, FAR_M), (False, CLOSE_M)):
        placed = time.monotonic()
        if far:
            # far from its first route on: the client's rule for a far car from the start
            orderid = await kit.create_order(status="driving")
        body = {"distance_left_m": distance_m}
        await kit.emulator(f"/emulator/v1/orders/taxi/{orderid}/driver", body)

        def measured(
            _: list[Exchange], orderid: str = orderid, far: bool = far, placed: float = placed
        ) -> bool:
            return _route_gap(kit, orderid, placed, far) is not None

        await kit.until(f"poll the route twice with the car {distance_m} m away", measured)
        gap = _route_gap(kit, orderid, placed, far)
        assert gap is not None
        gaps[far] = gap
    problems = []
    if gaps[False] >= gaps[True]:
        problems.append(
            f"the route was polled every {gaps[False]:.1f} s with the car {CLOSE_M} m away and "
            f"every {gaps[True]:.1f} s with it {FAR_M} m away: not more often when close"
        )
    for route in _routes(kit, orderid):
        missing = {"timestamp", "use_history"} - set(route.request)
        if missing:
            problems.append(f"a route request without {sorted(missing)} (taxiroute's request)")
            break
    # the trip ends: no route after the poll that says so
    for _ in range(3):
        await kit.advance(orderid)
    await kit.until("see the trip end", lambda ex: shown(ex, orderid, "complete"))
    ended = next(e for e in kit.exchanges() if shown([e], orderid, "complete"))
    await kit.until(
        "poll twice after the trip ended", lambda ex: len(polls_after(ex, ended.at)) >= 2
    )
    late = _routes(kit, orderid, ended.answered + VIEW_SLACK_S)
    if late:
        problems.append(f"{len(late)} route requests after the trip was over")
    return problems

"""When the next poll goes out: the server's interval, never cached (every answer sets it),
or at once after a waiting poll the server waited on or had news for, or when the user
creates an order (the poll in flight given up for one naming it); and the client's loop that
keeps that rhythm, with the route's own beside a held poll."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from client.model import INTERVAL_HEADER, POLL_AGAIN_AT_ONCE, WAIT_HEADER
from client.route import ROUTE_TICK_S
from client.transport import Reply, retry_after_seconds

T = TypeVar("T")


def next_poll(reply: Reply, fallback_s: float, spread_s: float = 0.0) -> tuple[float, bool]:
    """When to poll next after this answer to a poll: the interval (never cached: every
    answer sets it; the fallback without one), and whether to go again at once (a waiting
    poll the server waited on or had news for).

    A 503 of admission control says when, in whole seconds (HTTP's Retry-After), plus
    `spread_s`, a fraction of a second the caller draws at random: the thousands a storm shed
    in one instant would otherwise come back on the same few whole seconds, each time a
    storm of their own."""
    if reply.status == 0 or (reply.status == 200 and reply.body is None):
        return fallback_s, False
    if reply.status == 503 and "Retry-After" in reply.headers:
        return retry_after_seconds(reply.headers["Retry-After"], fallback_s) + spread_s, False
    try:
        interval_s = int(reply.headers[INTERVAL_HEADER]) / 1000
    except (KeyError, ValueError):
        interval_s = fallback_s
    return interval_s, reply.headers.get(WAIT_HEADER) in POLL_AGAIN_AT_ONCE


async def unless_set(work: Awaitable[T], event: asyncio.Event) -> asyncio.Future[T]:
    """`work`, given up (cancelled) if `event` is set first; its future, done unless given
    up. Given up as well when the caller is: a held waiting poll does not outlive it."""
    running = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait([running, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
    return running


async def cycle_until(
    stop: asyncio.Event,
    *,
    cycle: Callable[[], Awaitable[None]],
    poll_now: asyncio.Event,
    at_once: Callable[[], bool],
    interval_s: Callable[[], float],
    routes: Callable[[], Awaitable[None]],
    waiting: bool,
) -> None:
    """Cycle at the server's interval, or right after the last answer when `at_once()` says
    so, or when `poll_now` is set (an order the user created), until `stop` is set; a cycle
    in flight (a held waiting poll, most likely) is given up then. The route is polled after
    each cycle, or, `waiting` (the poll loop may be held for long), at its own rhythm beside
    it."""
    beside = asyncio.create_task(_every(stop, ROUTE_TICK_S, routes)) if waiting else None
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            if not at_once() and not poll_now.is_set():
                woken = asyncio.ensure_future(poll_now.wait())
                await asyncio.wait(
                    [stopped, woken], timeout=interval_s(), return_when=asyncio.FIRST_COMPLETED
                )
                woken.cancel()
            if stop.is_set():
                return
            cycled = await unless_set(cycle(), stop)
            if cycled.cancelled():
                return
            cycled.result()
            if beside is None:
                await routes()
    finally:
        stopped.cancel()
        if beside is not None:
            beside.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beside


async def _every(stop: asyncio.Event, tick_s: float, work: Callable[[], Awaitable[None]]) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=tick_s)
        await work()

"""When the next poll goes out: the server's interval, never cached (every answer sets it),
or at once after a waiting poll the server waited on or had news for."""

from __future__ import annotations

from client.model import INTERVAL_HEADER, POLL_AGAIN_AT_ONCE, WAIT_HEADER
from client.transport import Reply, retry_after_seconds


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

"""The waiting poll's decisions (docs/protocol.md: Waiting poll): what is news for the client, how
long a poll may wait, and the interval of a poll shed past the cap of waiting polls."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from shared.answer import AnsweredOrder, StaleOrder
from shared.wire import OrderKey

MAX_WAIT_MS = 25_000
# the random extra on a wait is at most wait_ms / 16: waits started together end apart
WAIT_JITTER_DIVISOR = 16


def longest_poll_s(source_deadline_s: float, tags_deadline_s: float) -> float:
    """The longest an orders/state request can take: the first look (sources, then tags), the
    longest wait with its extra, and one more look for a wake-up at its very end. A balancer's
    timeout, a gateway's, a pod's termination grace must all exceed it."""
    one_look_s = source_deadline_s + tags_deadline_s
    return 2 * one_look_s + MAX_WAIT_MS * (1 + 1 / WAIT_JITTER_DIVISOR) / 1000


def has_news(
    known_statuses: Mapping[OrderKey, str],
    answered: Sequence[AnsweredOrder],
    *,
    policy_changed: bool = False,
) -> bool:
    """News for the client: any part in `need_request`; an order whose status differs from
    the client's; an order the client did not list; a known order left out as finished; any
    stale order; a policy version to hold other than the client's (it launches again). A
    poll with news is answered at once; one without may wait."""
    if policy_changed:
        return True
    for order in answered:
        if isinstance(order, StaleOrder) or order.need_request:
            return True
        client_status = known_statuses.get(order.key)
        if client_status is None or client_status != order.status:
            return True
    answered_keys = {order.key for order in answered}
    return any(key not in answered_keys for key in known_statuses)


def wait_budget_ms(wait_ms: int, rng: random.Random) -> float:
    """How long a poll without news may be held: `wait_ms` plus a random extra of up to
    `wait_ms / 16`, so clients whose waits began together do not all come back at once."""
    return wait_ms + rng.uniform(0, wait_ms / WAIT_JITTER_DIVISOR)


def shed_interval_ms(interval_ms: int, *, factor: float, max_ms: int) -> int:
    """Past the cap of waiting polls a poll is answered at once and its client told to come
    back later than usual: load shedding by interval."""
    return int(min(max_ms, interval_ms * factor))


def lost_cache_interval_ms(
    interval_ms: int, *, degraded_factor: float, spread_ms: int, max_ms: int, rng: random.Random
) -> int:
    """The interval of a held poll answered because the tag cache or the pub/sub connection
    was lost: degraded (the cache is gone), and drawn over `spread_ms` more (the degraded
    min TTL), so that the thousands of polls answered in that one instant come back spread
    over it instead of as one storm on the sources."""
    degraded = interval_ms * degraded_factor
    return int(min(max_ms, degraded + rng.uniform(0, spread_ms)))

"""The watch cache (docs/protocol.md: Waiting poll; on by default, ORDERS_STATE_WATCH_CACHE):
each client's last look with no news, kept so that its next waiting poll, if nothing was heard
on its channels since, is held from it with no new look. The rule that says whether a kept
look still holds is pure (shared.protocol.waiting.kept_look_holds); this is its bounded
store."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

from services.bff.engine import LookResult
from services.bff.poll import Poll
from services.orders_state.waiting.ports import Wakeups
from shared.protocol.monotonic import echoed_version
from shared.protocol.waiting import KeptLook, kept_look_holds


def body_key(poll: Poll) -> Hashable | None:
    """What a poll's body adds to its watch-cache key, its user's id with it: computed once
    per kept body (services/orders_state/kept_requests.py), so a digest request skips it.
    None when the client forces a refetch (that needs a look)."""
    if poll.forced:
        return None
    return (
        poll.user_id,
        tuple(
            (
                known_order.key,
                known_order.order.status,
                # the look's answer is checked against the echo (monotonic reads)
                echoed_version(known_order.extras.get("version")),
                tuple(sorted(known_order.order.tags.items())),
            )
            for known_order in poll.known_orders
        ),
        tuple(poll.services),
        tuple(sorted(poll.stated_versions.items())),
    )


# a poll's body_key, or a memo of it (a kept body's, services/orders_state/kept_requests.py)
BodyKeyOf = Callable[[Poll], Hashable | None]


def cache_key(poll: Poll, body_key_of: BodyKeyOf = body_key) -> Hashable | None:
    """The same user, known orders (their statuses, echoed versions and tags), services and
    stated versions; none when the client forces a refetch (that needs a look)."""
    body = body_key_of(poll)
    if body is None:
        return None
    # forwarded to the sources: two devices of one user in two languages get two answers
    return (poll.caller.headers.get("Accept-Language"), body)


class KeptLooks:
    """At most `max_entries` clients' last looks, the least recently used dropped first."""

    def __init__(self, *, max_entries: int, max_age_ms: float, tags_read_within_ms: float) -> None:
        self.max_entries = max_entries
        # a full look at least this often: the earliest a kept source answer expires
        self.max_age_ms = max_age_ms
        # a look at least this long after the process's last answered tag read
        self.tags_read_within_ms = tags_read_within_ms
        self._kept: OrderedDict[Hashable, tuple[KeptLook, LookResult]] = OrderedDict()

    def holding(
        self,
        key: Hashable | None,
        wakeups: Wakeups,
        channels: Sequence[str],
        *,
        tag_cache_up: bool,
        tags_read_at_ms: float | None,
    ) -> tuple[KeptLook, LookResult] | None:
        """The client's last look, if it still holds for this poll. `tags_read_at_ms`: the
        process's last tag read order_tags answered (unix ms)."""
        if key is None or (entry := self._kept.get(key)) is None:
            return None
        if not kept_look_holds(
            entry[0],
            stamp=wakeups.stamp(channels),
            listening=all(map(wakeups.listening, channels)),
            tag_cache_up=tag_cache_up,
            tags_read_at_ms=tags_read_at_ms,
            now_ms=time.time() * 1000,
            max_age_ms=self.max_age_ms,
            tags_read_within_ms=self.tags_read_within_ms,
        ):
            del self._kept[key]
            return None
        self._kept.move_to_end(key)
        return entry

    def stamp(
        self, key: Hashable | None, wakeups: Wakeups, channels: Sequence[str]
    ) -> tuple[object, float] | None:
        """Taken before a look: what was heard on its channels by then, and when. None when
        the look cannot be kept (no key, or a channel not listened to from before it began,
        so a write during it might not ring)."""
        if key is None or not all(map(wakeups.listening, channels)):
            return None
        return wakeups.stamp(channels), time.time() * 1000

    def keep(self, key: Hashable, stamped: tuple[object, float], result: LookResult | None) -> None:
        """A look with no news is kept for the client's next poll; any other forgets it."""
        if result is None:
            self._kept.pop(key, None)
            return
        stamp, looked_at_ms = stamped
        since_ms = min(looked_at_ms, result.kept_since_ms or looked_at_ms)
        self._kept[key] = (KeptLook(since_ms, result.due_at_ms, stamp), result)
        self._kept.move_to_end(key)
        while len(self._kept) > self.max_entries:
            self._kept.popitem(last=False)

"""The waiting poll's decisions (docs/protocol.md: Waiting poll): what is news for the client, how
long a poll may wait, whether a poll answers now and why (its verdict), and the interval of a
poll shed past the cap of waiting polls or answered as Redis was lost."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Protocol

from shared.answer import AnsweredOrder, StaleOrder
from shared.protocol.interval import IntervalRules
from shared.wire import OrderKey

MAX_WAIT_MS = 25_000
# the random extra on a wait is at most wait_ms / 16: waits started together end apart
WAIT_JITTER_DIVISOR = 16


@dataclass(frozen=True)
class WaitingConfig:
    """The waiting polls' numbers; the settings (OrdersStateSettings and its `waiting`) read
    their defaults from here."""

    # waiting polls one process holds at most (MLUTP_MAX_WAITING; each costs memory:
    # docs/capacity.md); past it polls answer at once, interval grown
    max_waiting: int = 10_000
    # waiting polls of one user held at once (its devices, its app's tabs); past it that user's
    # polls answer at once, interval grown, so one user cannot take the whole cap
    max_waiting_per_user: int = 8
    # how long a poll may take to subscribe to its orders' channels before it answers at once
    # (`unavailable`) instead of waiting: longer than a Redis command's deadline, since under a
    # burst of polls the confirmations queue behind the process's own event loop
    subscribe_deadline_s: float = 0.5
    # after a wake-up a waiting poll looks again this much later, so a burst of writes to one
    # order (a feature writing several parts, changes made in one go) is one answer and one
    # round of part fetches. Off: with the emulator's change profile a window left heavy calls
    # per change as they were and cost its length in freshness (docs/loadtest-results.md: A
    # settle window after wake-ups)
    wakeup_settle_s: float = 0.0
    # past the cap of waiting polls, the interval given grows by this much (load shedding)
    shed_factor: float = 2.0
    # the longest interval: a client polls again within it (the settings' interval.max_ms)
    interval_max_ms: int = IntervalRules.max_ms
    # hold a waiting re-poll from its client's last look while nothing changed (the watch
    # cache, docs/protocol.md: Waiting poll): a waiting re-poll with nothing new costs a third
    # of a look (docs/capacity.md: The watch cache). A wake-up lost on a live connection (a
    # write made around order_tags) is then seen at the next full look, within 0.75 ×
    # list_max_age, not one wait; a service without list tags is asked on every poll all the
    # same. The default of ORDERS_STATE_WATCH_CACHE: off, every waiting poll looks (an operator
    # whose writers bypass order_tags may want that)
    watch_cache: bool = True
    # a kept look holds only while the process's last tag read that order_tags answered is
    # younger than this. Held re-polls read no tags, so with order_tags down and its Redis up
    # no read fails (the circuit stays closed) and no poll rings (the writers' writes fail, so
    # nothing is published): a change made meanwhile would wait for order_tags' return or the
    # next full look. The pub/sub keepalive's period (WakeupTimings.keepalive_s): a silent
    # order_tags is found about as soon as a silent Redis, and a change made meanwhile shows
    # within it and one wait, near a client's interval without waiting. It costs a quiet
    # process one look per period and a busy one nothing (its looks read tags all the time);
    # held polls are not answered for it, each re-poll past it looks on its own: no burst
    tags_read_within_s: float = 5.0


@dataclass(frozen=True)
class WakeupTimings:
    """The wake-ups' pub/sub numbers; the settings (OrdersStateSettings' `waiting`) read their
    defaults from here."""

    # a channel no poll waits on stays subscribed this long: the client's next poll (an
    # interval later, 5 s for most statuses) waits on the same orders right away
    linger_s: float = 5.0
    # an idle pub/sub connection sends a PING this often: a Redis `timeout` (common on managed
    # Redis) never closes it, and one that stopped answering is dropped and made again after
    # two periods of silence
    keepalive_s: float = 5.0


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


# a poll of a client the process has not held lately is held for a wait drawn from this share
# of wait_ms up (wait_budget_ms: first_here)
FIRST_WAIT_FROM = 0.5


def wait_budget_ms(wait_ms: int, rng: random.Random, *, first_here: bool = False) -> float:
    """How long a poll without news may be held: `wait_ms` plus a random extra of up to
    `wait_ms / 16`, so clients whose waits began together do not all come back at once.

    A poll that is its client's first here (`first_here`: the process has not held one of its
    user's polls lately) is held from half of `wait_ms` up to the same end. Such polls come
    together: every poll a stopping replica answered `shutdown` comes back at once to the
    others, every client of a restarted one at its first poll. With a sixteenth of spread
    their waits would end together a wait later, and the source answers kept meanwhile
    expired would be asked again in one burst; over half a wait they come back spread, and
    stay so (docs/protocol.md: Waiting poll)."""
    if first_here:
        return rng.uniform(wait_ms * FIRST_WAIT_FROM, wait_ms + wait_ms / WAIT_JITTER_DIVISOR)
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


class WaitCause(StrEnum):
    """Why a poll that asked to wait was answered when it was (the X-Mlutp-Wait header).
    After news, wakeup, timeout or shutdown the client may poll again at once; after
    unavailable or shed it polls at the interval, as without waiting."""

    NEWS = "news"  # news at once, no wait
    WAKEUP = "wakeup"  # news after a wake-up or the min TTL
    TIMEOUT = "timeout"  # the wait ended without news
    UNAVAILABLE = "unavailable"  # cannot wait now: tag cache, a source or pub/sub is down
    SHED = "shed"  # past the cap of waiting polls
    SHUTDOWN = "shutdown"  # the process is stopping


class Moment(Enum):
    """Where a waiting poll stands when its verdict is asked."""

    # a look of a poll not held yet (its first, or one more once it listens to all its orders)
    LOOKED = "looked"
    # a look after a hold: news now is a wake-up's
    LOOKED_AGAIN = "looked again"
    # about to be held on its last look, which had no news
    HOLDING = "holding"
    # its hold ended by its doorbell: a wake-up (or wake-ups lost, or the process stopping)
    RUNG = "rung"
    # its hold ended as the min TTL lets a change it held back through
    DUE = "due"
    # its hold ended at the wait's end
    ENDED = "ended"


class Look(Protocol):
    """What the verdict reads of one look (sources and tags) of the poll."""

    @property
    def orders(self) -> Sequence[AnsweredOrder]: ...

    @property
    def policy_changed(self) -> bool: ...

    @property
    def cannot_wait(self) -> bool:
        """The tag cache or a source was unavailable or lagging: no wake-up can be trusted."""
        ...


@dataclass(frozen=True)
class Answer:
    """Answer now, with the poll's last look."""

    cause: WaitCause
    # a held poll answered as the tag cache or pub/sub was lost: its interval is
    # lost_cache_interval_ms, not the look's
    redis_lost: bool = False


class KeepWaiting(Enum):
    """Not yet: after a look the poll is held, after a hold it looks again."""

    KEEP_WAITING = "keep waiting"


KEEP_WAITING = KeepWaiting.KEEP_WAITING

Verdict = Answer | KeepWaiting


def waiting_verdict(
    moment: Moment,
    look: Look,
    known_statuses: Mapping[OrderKey, str],
    *,
    may_wait: bool,
    tag_cache_up: bool,
    shutting_down: bool,
    time_left_s: float,
    room: bool = True,
) -> Verdict:
    """Whether a poll that asked to wait answers now, and why, or waits on.

    `look` is the poll's last look and `known_statuses` the client's orders as it sent them.
    `may_wait`: wake-ups work now (the pub/sub connection is up; false for a poll that could
    not listen); `tag_cache_up`: the tag cache's circuit is closed; `time_left_s`: of the
    poll's wait; `room`: below the caps of waiting polls (the process's, the user's).

    A look with news answers at once (`news`), or after a hold `wakeup`; one that cannot
    wait, or made when the process cannot, answers `unavailable` (`shutdown` once the
    process stops). A look after a hold with no news answers at the wait's end (`timeout`),
    or holds the poll again. A held poll answers its last look with no new look on shutdown,
    when the tag cache or pub/sub is lost (`unavailable`, its interval spread) and at the
    wait's end (`timeout`); a woken one checks all that before it looks again."""
    if moment in (Moment.LOOKED, Moment.LOOKED_AGAIN):
        if look.cannot_wait or not may_wait or shutting_down:
            return Answer(WaitCause.SHUTDOWN if shutting_down else WaitCause.UNAVAILABLE)
        if has_news(known_statuses, look.orders, policy_changed=look.policy_changed):
            return Answer(WaitCause.NEWS if moment is Moment.LOOKED else WaitCause.WAKEUP)
        if moment is Moment.LOOKED:
            # held once it listens to all its orders, unless past the caps
            return KEEP_WAITING if room else Answer(WaitCause.SHED)
        if time_left_s <= 0:
            return Answer(WaitCause.TIMEOUT)
        # no news: held again on this look
    if shutting_down:
        return Answer(WaitCause.SHUTDOWN)
    if not may_wait or not tag_cache_up:
        # a new look would find the cache down and ask every source, and thousands of held
        # polls doing so in one instant are a burst no legacy client ever made
        return Answer(WaitCause.UNAVAILABLE, redis_lost=True)
    if moment is Moment.ENDED:
        # the last look had no news, and the client polls again at once: a lost wake-up is
        # seen by that poll's tags, so looking again here would only double every idle
        # client's cost (a source call and a tag read per wait)
        return Answer(WaitCause.TIMEOUT)
    return KEEP_WAITING


@dataclass(frozen=True)
class KeptLook:
    """What a process remembers of a waiting poll's last look with no news, to hold the
    client's next poll from it (the watch cache): since when its sources' answers stand (unix
    ms: the look's start, or when the oldest kept answer it used was kept), the moment the
    min TTL lets a change it held back through (unix ms, or None), and its channels' stamp
    taken before it began, when every channel was listened to (a message heard on any of
    them, or pub/sub lost or back, changes it)."""

    since_ms: float
    due_at_ms: int | None
    stamp: object


def kept_look_holds(
    kept: KeptLook,
    *,
    stamp: object,
    listening: bool,
    tag_cache_up: bool,
    tags_read_at_ms: float | None,
    now_ms: float,
    max_age_ms: float,
    tags_read_within_ms: float,
) -> bool:
    """Whether a waiting poll the same as the one that made `kept` (the same user, known
    orders with the same statuses and tags, none forced, the same services and stated
    versions) may be held at once from that look, with no new look (docs/protocol.md:
    Waiting poll): nothing heard on its channels since and pub/sub never lost in between
    (`stamp` is still the kept one), every channel still listened to, the tag cache's
    circuit closed and the process's last answered tag read (`tags_read_at_ms`, unix ms; None:
    none yet) younger than `tags_read_within_ms` (held re-polls read no tags: order_tags gone
    silent with its Redis up would open no circuit and ring no poll), no change the min TTL
    held back due yet, and its answers younger than `max_age_ms` (KEPT_AGE_SPREAD_FROM ×
    list_max_age: no kept answer it read can have expired, so a full look happens that often
    at least, and sees a lost message's change)."""
    return (
        listening
        and tag_cache_up
        and tags_read_at_ms is not None
        and now_ms - tags_read_at_ms < tags_read_within_ms
        and stamp == kept.stamp
        and now_ms - kept.since_ms < max_age_ms
        and (kept.due_at_ms is None or now_ms < kept.due_at_ms)
    )

"""List tags (docs/protocol.md: List tags): when a poll may take a source's kept answer
instead of asking the source, and when a known order its source does not list yet is kept
for a grace. Pure, no I/O."""

from __future__ import annotations

import random


def kept_answer_usable(
    current_tag: str | None,
    kept_tag: str | None,
    kept_at_ms: int | None,
    *,
    now_ms: int,
    max_age_ms: int,
) -> bool:
    """A source's kept answer stands for asking it when it was kept under the list tag the
    tag cache holds now (the source bumps that tag on every change of its list) and is younger
    than `list_max_age`: a source that failed to bump is asked again within that age."""
    if current_tag is None or kept_tag is None or kept_at_ms is None:
        return False
    if kept_tag != current_tag:
        return False
    return 0 <= now_ms - kept_at_ms < max_age_ms


def answer_current(
    read_tag: str | None, served_tag: str | None, *, omits_a_just_created_order: bool
) -> bool:
    """Whether a source's answer is of the data its list tag stood for when read before the
    call (not a lagging replica's): only such an answer is kept for later polls, and only its
    orders get tags made. A source asked with its list tag names the tag of the data it
    serves: that very tag, or its answer lags and is used for this poll alone. One that names
    none is used for this poll alone too: a replica that does not say how old its data is
    cannot stand for later polls (it may omit a just-created order the asking poll does not
    know, and kept, outlive the order's grace). A source asked without a tag (its service
    does not opt in) is judged by the created grace alone: current unless it omits a known
    order still within it."""
    if read_tag is not None:
        return served_tag == read_tag
    return not omits_a_just_created_order


# each kept answer's own age limit is drawn from this share of list_max_age up to all of it:
# answers kept in the same second (after a Redis restart or flush) expire over a quarter of
# the age, not again in one second
KEPT_AGE_SPREAD_FROM = 0.75


def kept_answer_max_age_ms(max_age_ms: int, rng: random.Random) -> int:
    """The age limit of one kept answer: between 0.75 and 1 of `list_max_age`, at random, so
    that re-asks after a flush or restart do not come back in synchronised waves."""
    return max(1, int(max_age_ms * rng.uniform(KEPT_AGE_SPREAD_FROM, 1.0)))


def within_created_grace(created_ms: int | None, *, now_ms: int, grace_ms: int) -> bool:
    """A known order its (available) source does not list is kept, stale, while its tags
    were first written less than `created_grace` ago: a source that lags behind order
    creation must not make a just-created order vanish. Past the grace it has finished."""
    if created_ms is None:
        return False
    return now_ms - created_ms < grace_ms

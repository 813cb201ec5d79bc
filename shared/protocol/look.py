"""One look's decisions (docs/protocol.md: Polling orders, List tags, A just-created order the
source does not list yet, Waiting poll): which known orders stay stale, which just-asked
answers are kept and which orders get tags made, whether the poll is degraded and whether a
source lags. What is news to a waiting client is `shared.protocol.waiting.has_news`. Pure, no
I/O."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from shared.protocol.interval import IntervalRules
from shared.protocol.need_request import TagTimings
from shared.wire import OrderKey

A = TypeVar("A")


@dataclass(frozen=True)
class EngineConfig:
    """A look's numbers; the settings (ProtocolSettings) read their defaults from here."""

    timings: TagTimings = field(default_factory=TagTimings)
    interval: IntervalRules = field(default_factory=IntervalRules)
    # force honoured at most this often per order per minute (per fleet); beyond: absent. A
    # user pressing refresh is served; an app looping on force costs the source 6 calls a
    # minute
    force_per_order_per_minute: int = 6
    # sources whose policy says list_tags are answered from kept answers (off: always asked,
    # to measure what list tags save; the policy's list_tags per service is the operator's
    # switch)
    list_tags: bool = True
    # a kept source answer stands for the source this long at most (docs/protocol.md: List
    # tags): the bound on what a source that forgot to bump its list tag can hide
    list_max_age_ms: int = 120_000
    # a known order its source does not list stays (stale) this long after its tags were made
    # (docs/protocol.md: A just-created order the source does not list yet): room for a
    # source's replica lag of seconds
    created_grace_ms: int = 10_000
    # the order-source budget (docs/protocol.md: A fleet): calls to one source per process in
    # any 5 s at most this many, over it the process's last answer of the user stands in (0:
    # no budget, the protocol's rules alone; the operator sizes it from the steady rate)
    source_calls_per_window: int = 0
    # the last answers kept per process for it: (user, service) pairs
    last_answers_max_entries: int = 20_000


def stays_stale(
    key: OrderKey,
    *,
    available: Collection[str],
    not_listed_yet: Collection[OrderKey],
    behind: Collection[OrderKey],
) -> bool:
    """A known order comes back stale, as the client knew it, when its service is unavailable
    (Polling orders), when its source does not list it yet within the created grace (A
    just-created order the source does not list yet), or when its source gives it at an older
    version than the client echoed (an order never goes backwards)."""
    return key.service not in available or key in not_listed_yet or key in behind


def answers_to_keep(
    asked: Mapping[str, A | None],
    *,
    current: Collection[str],
    with_list_tags: Collection[str],
    shared: Collection[str],
) -> dict[str, A]:
    """The just-asked answers kept for later polls (List tags): a current one of a service
    with list tags, kept by the poll that made the call. A lagging answer is used for its poll
    alone: kept, it would stand for the source under a tag whose data it does not show, longer
    than the created grace; the polls that shared a call would write its answer again."""
    return {
        service: answer
        for service, answer in asked.items()
        if answer is not None
        and service in current
        and service in with_list_tags
        and service not in shared
    }


def tags_made_for(listed: Iterable[OrderKey], current: Collection[str]) -> set[OrderKey]:
    """The listed orders whose missing tags are made (List tags): those a current answer lists.
    A kept answer may list an order that has finished since (its tags deleted, its list bump
    not read yet), and tags made for it again would also open its created grace."""
    return {key for key in listed if key.service in current}


def look_degraded(
    *,
    tag_store_up: bool,
    queried: Iterable[str],
    served: Collection[str],
    available: Collection[str],
    known_services: Iterable[str],
) -> bool:
    """A poll is degraded while the tag store or a queried source is unavailable (Polling
    interval: its interval doubled; Waiting poll: it answers at once). A known order of a
    service this server does not serve counts too: its stale answer must not make a waiting
    client poll again at once. A service merely named in supported_services that the server
    does not serve has no source to protect: it degrades nothing."""
    return (
        not tag_store_up
        or any(service in served and service not in available for service in queried)
        or any(service not in served for service in known_services)
    )


def source_lagging(
    *,
    not_listed_yet: Collection[OrderKey],
    behind: Collection[OrderKey],
    answered: Iterable[str],
    current: Collection[str],
) -> bool:
    """A source lags (Waiting poll: the poll answers at once) when it does not list a
    just-created known order yet, gives an order older than its client echoed, or answered
    with data older than the list tag read before asking. The bump that would wake a waiting
    poll has rung already, or none is coming (versions are not in list tags)."""
    return bool(not_listed_yet or behind) or any(service not in current for service in answered)

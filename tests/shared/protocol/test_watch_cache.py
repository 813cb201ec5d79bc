"""docs/protocol.md: Waiting poll, the watch cache: the server may hold a re-poll from its
client's last look while nothing changed and its process has heard the tag store lately, and
makes a full look at least every 0.75 × list_max_age. Each rule of
shared.protocol.waiting.kept_look_holds a test."""

from __future__ import annotations

from typing import Any

from shared.protocol.list_tags import KEPT_AGE_SPREAD_FROM
from shared.protocol.waiting import KeptLook, kept_look_holds

LIST_MAX_AGE_MS = 120_000
MAX_AGE_MS = KEPT_AGE_SPREAD_FROM * LIST_MAX_AGE_MS
LOOKED_MS = 1_000_000
STAMP = (0, (4, 9))
# WaitingConfig.tags_read_within_s's default
TAGS_READ_WITHIN_MS = 5_000


def holds(kept: KeptLook | None = None, **now: Any) -> bool:
    """Whether the re-poll is held from `kept`, one second after the look (the process's last
    answered tag read) unless told."""
    state: dict[str, Any] = {
        "stamp": STAMP,
        "listening": True,
        "tag_cache_up": True,
        "tags_read_at_ms": LOOKED_MS,
        "now_ms": LOOKED_MS + 1_000,
        "max_age_ms": MAX_AGE_MS,
        "tags_read_within_ms": TAGS_READ_WITHIN_MS,
    }
    state.update(now)
    return kept_look_holds(kept or KeptLook(LOOKED_MS, None, STAMP), **state)


def test_a_re_poll_while_nothing_changed_is_held_from_the_last_look() -> None:
    assert holds()


def test_a_message_heard_on_a_channel_since_the_look_needs_a_look() -> None:
    # a tag write on one of its orders or the user's lists bumped that channel's generation
    assert not holds(stamp=(0, (4, 10)))


def test_pub_sub_lost_or_back_since_the_look_needs_a_look() -> None:
    # messages published while the connection was down were never heard
    assert not holds(stamp=(1, (4, 9)))


def test_a_channel_not_listened_to_now_needs_a_look() -> None:
    assert not holds(listening=False)


def test_the_tag_cache_circuit_open_needs_a_look() -> None:
    assert not holds(tag_cache_up=False)


def test_no_tag_read_answered_within_the_bound_needs_a_look() -> None:
    # held re-polls read no tags: with order_tags silent and its Redis up no circuit opens and
    # no poll rings, so a kept look holds only while the process has heard the tag store lately
    assert holds(now_ms=LOOKED_MS + TAGS_READ_WITHIN_MS - 1)
    assert not holds(now_ms=LOOKED_MS + TAGS_READ_WITHIN_MS)


def test_any_answered_tag_read_of_the_process_counts_not_only_this_clients() -> None:
    # under load another poll's look read tags a moment ago: this client's older look holds
    now_ms = LOOKED_MS + 60_000
    assert holds(now_ms=now_ms, tags_read_at_ms=now_ms - 100)
    assert not holds(now_ms=now_ms, tags_read_at_ms=None)


def test_a_full_look_happens_at_least_every_three_quarters_of_list_max_age() -> None:
    # a kept answer may expire that early: after it a look asks the source, which may have
    # changed without its bump (or its message) arriving
    read_ms = LOOKED_MS + MAX_AGE_MS - 1_000
    assert holds(now_ms=LOOKED_MS + MAX_AGE_MS - 1, tags_read_at_ms=read_ms)
    assert not holds(now_ms=LOOKED_MS + MAX_AGE_MS, tags_read_at_ms=read_ms)
    assert MAX_AGE_MS == 90_000


def test_the_age_counts_from_the_oldest_kept_answer_the_look_used() -> None:
    # the look read an answer kept 60 s before it: only 30 s of the 90 are left
    kept = KeptLook(LOOKED_MS - 60_000, None, STAMP)
    assert holds(kept, now_ms=LOOKED_MS + 29_000, tags_read_at_ms=LOOKED_MS + 28_000)
    assert not holds(kept, now_ms=LOOKED_MS + 30_000, tags_read_at_ms=LOOKED_MS + 29_000)


def test_a_change_the_min_ttl_held_back_becoming_due_needs_a_look() -> None:
    kept = KeptLook(LOOKED_MS, LOOKED_MS + 5_000, STAMP)
    assert holds(kept, now_ms=LOOKED_MS + 4_999)
    assert not holds(kept, now_ms=LOOKED_MS + 5_000)

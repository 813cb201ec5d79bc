"""A process's memory of whose waiting polls it took lately: a poll of a user it has not seen
(after a replica stopped and its clients came here, after a restart) is the first here, and
its wait is drawn wider (docs/protocol.md: Waiting poll)."""

from __future__ import annotations

from services.orders_state.waiting.seen_users import SeenUsers


def test_a_users_first_poll_is_first_here_and_the_next_is_not():
    seen = SeenUsers(max_entries=10, forget_after_s=60)
    assert seen.first_here("u1", now=0.0)
    assert not seen.first_here("u1", now=25.0)
    assert seen.first_here("u2", now=25.0)


def test_a_user_not_seen_for_longer_than_the_longest_interval_is_first_here_again():
    seen = SeenUsers(max_entries=10, forget_after_s=60)
    seen.first_here("u1", now=0.0)
    assert seen.first_here("u1", now=61.0)


def test_the_memory_is_bounded_and_drops_the_least_recently_seen():
    seen = SeenUsers(max_entries=2, forget_after_s=60)
    for user in ("u1", "u2", "u3"):
        seen.first_here(user, now=0.0)
    assert len(seen) == 2
    assert not seen.first_here("u3", now=1.0)
    assert seen.first_here("u1", now=1.0)

"""The pending tag write of one order (docs/protocol.md: Feature data and user changes): a
later write merged into an earlier one leaves the store as the two one after another would
have, a delete supersedes what was pending, and retries back off exponentially with full
jitter up to a cap."""

from __future__ import annotations

import random

import pytest

from shared.protocol.tag_writes import (
    OrderWrite,
    merged_order_write,
    retry_delay_s,
    supersedes,
)


def replayed(writes: list[OrderWrite], stored: dict[str, str]) -> dict[str, str]:
    """The order's tags after these writes one after another, a bump making a tag never seen
    (named by the write's position, so that two bumps differ)."""
    tags = dict(stored)
    for number, write in enumerate(writes):
        if write.delete:
            tags = {}
        tags.update(write.sets)
        for part in write.bumps:
            tags[part] = f"bumped-{number}"
    return tags


def same_outcome(one: dict[str, str], other: dict[str, str]) -> bool:
    """The same parts, equal where set, a fresh bump where bumped (which bump: no matter)."""
    if one.keys() != other.keys():
        return False
    return all(
        one[part] == other[part]
        or (one[part].startswith("bumped") and other[part].startswith("bumped"))
        for part in one
    )


def test_a_newer_set_of_a_part_replaces_the_older_set_of_it():
    merged = merged_order_write(
        OrderWrite(sets={"fast_info": "v2", "rarely_changed": "v2"}),
        OrderWrite(sets={"fast_info": "v3"}),
    )
    assert merged == OrderWrite(sets={"fast_info": "v3", "rarely_changed": "v2"})


def test_a_bump_after_a_set_of_the_same_part_is_still_done_after_it():
    merged = merged_order_write(
        OrderWrite(sets={"full_info": "n1-a"}, owner="u1"), OrderWrite(bumps=("full_info",))
    )
    # the set (with the owner the creating write names) goes first, the bump then makes the
    # tag new: never the set's, which a client may already hold
    assert merged == OrderWrite(sets={"full_info": "n1-a"}, owner="u1", bumps=("full_info",))


def test_a_set_after_a_bump_of_the_same_part_replaces_the_bump():
    merged = merged_order_write(OrderWrite(bumps=("a", "b")), OrderWrite(sets={"a": "v5"}))
    assert merged == OrderWrite(sets={"a": "v5"}, bumps=("b",))


def test_bumps_of_one_order_pending_together_are_one_bump():
    merged = merged_order_write(OrderWrite(bumps=("a", "b")), OrderWrite(bumps=("b", "c")))
    assert merged == OrderWrite(bumps=("a", "b", "c"))


def test_the_owner_named_by_the_creating_write_is_kept():
    merged = merged_order_write(
        OrderWrite(sets={"a": "v1"}, owner="u1"), OrderWrite(sets={"a": "v2"})
    )
    assert merged.owner == "u1"


def test_a_delete_supersedes_everything_pending_before_it():
    older = OrderWrite(sets={"a": "v1"}, owner="u1", bumps=("b",))
    delete = OrderWrite(delete=True)
    assert merged_order_write(older, delete) == delete
    assert supersedes(older, delete)
    assert not supersedes(OrderWrite(), delete)
    assert not supersedes(older, OrderWrite(bumps=("a",)))


def test_writes_after_a_delete_follow_it():
    merged = merged_order_write(OrderWrite(delete=True), OrderWrite(sets={"a": "v9"}))
    assert merged == OrderWrite(delete=True, sets={"a": "v9"})


PARTS = ("a", "b", "c")


def random_write(rng: random.Random, number: int) -> OrderWrite:
    sets = {p: f"v{number}{p}" for p in PARTS if rng.random() < 0.3}
    bumps = tuple(p for p in PARTS if rng.random() < 0.3)
    return OrderWrite(delete=rng.random() < 0.1, sets=sets, bumps=bumps)


@pytest.mark.parametrize("seed", range(200))
def test_any_writes_merged_leave_the_tags_the_writes_one_by_one_would(seed: int):
    rng = random.Random(seed)
    writes = [random_write(rng, n) for n in range(rng.randint(2, 6))]
    merged = writes[0]
    for write in writes[1:]:
        merged = merged_order_write(merged, write)
    stored = {"a": "old", "c": "old"}
    assert same_outcome(replayed([merged], stored), replayed(writes, stored)), writes


def test_the_retry_window_doubles_from_the_base_up_to_the_cap():
    windows = [retry_delay_s(n, base_s=0.1, cap_s=2.0, draw=1.0) for n in range(1, 8)]
    assert windows == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])


def test_full_jitter_draws_anywhere_in_the_window():
    assert retry_delay_s(3, base_s=0.1, cap_s=2.0, draw=0.0) == 0.0
    assert retry_delay_s(3, base_s=0.1, cap_s=2.0, draw=0.5) == pytest.approx(0.2)
    assert retry_delay_s(10_000, base_s=0.1, cap_s=2.0, draw=0.999) < 2.0

"""The windows benchmarks/fleet_load.py judges the fleet's load by (docs/protocol.md: A fleet,
the bounds hold in every 5-s window): every 5-s window, not only the printed 5-s tiles, and
per order against legacy's one document in 5 s (its work, a call of each part upstream) plus a
fetch per change of that order; the taxi part services' work and calls are the taxi order's."""

from __future__ import annotations

from benchmarks.fleet_windows import WINDOW_S, Counts, Legacy, Readings

LEGACY = Legacy(
    document_work={"taxi": 100, "eats": 40, "grocery": 40},
    change_work={"taxi": 30, "eats": 40, "grocery": 40},
)


def readings(sources_at: dict[float, int], until: float) -> Readings:
    """Reads every 250 ms from 0 to `until`, with `sources_at[t]` source calls made at t."""
    made = Readings("http://127.0.0.1:1", [], list_max_age_s=120)
    total = 0
    for step in range(int(until / 0.25) + 1):
        t = step * 0.25
        total += sources_at.get(t, 0)
        made.samples.append((t, Counts(total, 0, 0, 0)))
    return made


def test_a_burst_across_two_tiles_is_judged_whole_by_the_sliding_windows():
    # 30 calls just before the 5-s edge and 30 just after: each tile holds 30
    calls = {3.75 + 0.25 * i: 5 for i in range(6)} | {5.25 + 0.25 * i: 5 for i in range(6)}
    made = readings(calls, until=15.0)
    assert [counts.sources for _, _, counts in made.tiles(0.0, 15.0, WINDOW_S)] == [30, 30, 0]
    worst, at = made.sliding(0.0, 15.0, WINDOW_S)["sources"]
    assert worst == 60
    assert 1.5 <= at <= 3.5


def test_per_order_counts_a_fetch_for_each_change_of_that_order():
    made = Readings("http://127.0.0.1:1", ["u1", "u2"], list_max_age_s=120)
    # counters per user: priced upstream → (calls, work)
    made.rounds = [
        (0.0, {"u1": {}, "u2": {}}),
        (
            5.0,
            {
                "u1": {"part:order_core": (2, 60), "part:orderchat": (1, 10)},
                "u2": {"eats_details": (2, 76)},
            },
        ),
    ]
    # u1's taxi order changed once in the window: its second order_core call is the change's
    [window] = made.per_order(0.0, 10.0, changes=[(2.0, "u1", "taxi")], legacy=LEGACY)
    assert (window.calls, window.calls_order) == (2, "u1 taxi part:order_core")
    # the most work for one order by its legacy document's: u2's eats, two whole documents
    assert (window.work, window.work_legacy, window.work_order) == (76, 40, "u2 eats")
    assert window.over_calls == 2  # u1's taxi and u2's eats each had an upstream called twice
    assert window.over_work == 1  # u1's taxi: 70 units, under its document's 100
    assert (window.beyond_calls, window.beyond_work) == (1, 1)  # u2's eats was not changed
    [unchanged] = made.per_order(0.0, 10.0, changes=[], legacy=LEGACY)
    assert (unchanged.beyond_calls, unchanged.beyond_work) == (2, 1)


def test_a_change_made_within_the_min_ttl_before_a_read_pays_for_its_fetch_after_it():
    made = Readings("http://127.0.0.1:1", ["u1"], list_max_age_s=120)
    made.rounds = [(5.0, {"u1": {}}), (10.0, {"u1": {"eats_details": (2, 76)}})]
    # changed 2.5 s before the read: the part was fetched just before, so the change's fetch
    # waited for the min TTL (2 s) and came after the read
    [window] = made.per_order(5.0, 10.0, changes=[(2.5, "u1", "eats")], legacy=LEGACY)
    assert window.beyond_calls == 0
    # one made earlier than the min TTL and a second before it was fetched before the read
    [early] = made.per_order(5.0, 10.0, changes=[(1.5, "u1", "eats")], legacy=LEGACY)
    assert early.beyond_calls == 1


def test_the_taxi_part_services_work_adds_up_for_the_taxi_order():
    made = Readings("http://127.0.0.1:1", ["u1"], list_max_age_s=120)
    parts = {"part:order_core": (1, 40), "part:order_settings": (1, 35), "taxiroute": (3, 33)}
    made.rounds = [(0.0, {"u1": {}}), (5.0, {"u1": parts})]
    [window] = made.per_order(0.0, 10.0, changes=[], legacy=LEGACY)
    # one call each, but together more work than legacy's one totw document
    assert (window.work, window.work_order, window.over_work) == (108, "u1 taxi", 1)
    # the route's calls are paced by its own rule: not counted against one call in 5 s
    assert window.calls == 1
    assert window.over_calls == 0

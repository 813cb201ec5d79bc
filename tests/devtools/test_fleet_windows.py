"""The windows benchmarks/fleet_load.py judges the fleet's load by (docs/protocol.md: A fleet,
the bounds hold in every 5-s window): every 5-s window, not only the printed 5-s tiles, and
per order against legacy's one document in 5 s plus a fetch per change of that order."""

from __future__ import annotations

from benchmarks.fleet_windows import WINDOW_S, Counts, Readings


def readings(sources_at: dict[float, int], until: float) -> Readings:
    """Reads every 250 ms from 0 to `until`, with `sources_at[t]` source calls made at t."""
    made = Readings("http://127.0.0.1:1", [], list_max_age_s=120)
    total = 0
    for step in range(int(until / 0.25) + 1):
        t = step * 0.25
        total += sources_at.get(t, 0)
        made.samples.append((t, Counts(total, 0, 0)))
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
    # counters per user: totw, eats details, grocery details, performer
    made.rounds = [
        (0.0, {"u1": (0, 0, 0, 0), "u2": (0, 0, 0, 0)}),
        (5.0, {"u1": (2, 0, 0, 1), "u2": (0, 2, 0, 0)}),
    ]
    # u1's taxi order changed once in the window: its second totw call is the change's
    [window] = made.per_order(0.0, 10.0, changes=[(2.0, "u1", "taxi")])
    assert window.heavy == 2
    assert window.over == 2  # u1's taxi and u2's eats each got two documents
    assert window.beyond_changes == 1  # u2's eats was not changed: above legacy
    [unchanged] = made.per_order(0.0, 10.0, changes=[])
    assert unchanged.beyond_changes == 2

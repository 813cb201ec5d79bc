"""The simulation finds what it must: each of the four failures the last review found where
the mechanisms meet, put back (tests/simulation/regressions.py), breaks an invariant on a seed
of the CI set, and the same seed passes with the fix in place. The seeds are the first of the
CI set that found each (of 200: (a) 50, (b) 132, (c) 148, (d) 80, (e) 8; see the README). (e)
is the watch cache's own, off by default: its runs have it on (Options.watch_cache)."""

from __future__ import annotations

import pytest

from devtools.simulation.options import Options
from devtools.simulation.run import run_seed
from tests.simulation.regressions import SWITCHES

# failure → (seed, the invariant that found it there)
FOUND = {
    # a just-created order vanishes past its grace: a lagging replica's answer kept
    "a": [(4, "vanished"), (15, "finished")],
    # held polls look again when Redis is lost: the look itself, and the burst on the sources
    "b": [(1, "lost_redis"), (8, "load")],
    # answers kept in the same second all expire in the same second
    "c": [(2, "kept_ages")],
    # another user's force spends the owner's budget
    "d": [(2, "force")],
    # a re-poll held from its last look though a write was heard on its channels since
    "e": [(65, "watch_cache")],
}


@pytest.mark.parametrize(
    ("failure", "seed", "invariant"),
    [(failure, seed, invariant) for failure, found in FOUND.items() for seed, invariant in found],
)
def test_the_simulation_finds_it(
    monkeypatch: pytest.MonkeyPatch, failure: str, seed: int, invariant: str
) -> None:
    options = Options(watch_cache=failure == "e")
    fixed = run_seed(seed, options=options)
    assert fixed.ok, fixed.describe()
    SWITCHES[failure](monkeypatch)
    broken = run_seed(seed, options=options)
    assert not broken.ok, f"failure ({failure}) put back, and seed {seed} found nothing"
    assert broken.violations[0].invariant == invariant, broken.describe()

"""The simulation finds what it must: each of the four failures the last review found where
the mechanisms meet, put back (tests/simulation/regressions.py), breaks an invariant on a seed
of the CI set, and the same seed passes with the fix in place. The seeds are the first of the
CI set that found each (of 200: (a) 50, (b) 132, (c) 148, (d) 80, (e) 8; see the README). (e)
is the watch cache's own; every run has it on, the default (Options.watch_cache), and each
seed below found its failure with it off too, before it was the default.

(f) and (g) are the fleet's, put back by an option rather than a patch: writers that drop a
tag write the store refused (Options.lossy_writers: a change hidden, an order answered
backwards from a kept answer whose bump was lost) and a balancer that sprays a user's requests
over the replicas (Options.spraying_router: each process's memos see a share of them, and the
part upstreams get more than legacy polling gave them, also while the tag store is down). (h)
puts back the other High of the fleet's issue: no version check (monotonic reads off), and
orders go backwards even with writers that retry.

(i) and (j) are the shared part cache's (services/bff/part_cache.py), found by what each part
answered carries: its upstream's stamp of whom it was fetched for and the order's revision
then (devtools/simulation/documents.py). (i) keys the cache without the user: a misbehaving
client asking for another user's order gets that user's data (`crossing`, by the stamp). (j)
serves an entry whatever content tag it was fetched under: a part answered under the current
content tag with data from before that tag's write (`behind_tag`)."""

from __future__ import annotations

import pytest
import yaml

from devtools.simulation import run
from devtools.simulation.options import Options
from devtools.simulation.run import run_seed
from shared.policy import DEFAULT_POLICY_PATH, PollingPolicy, parse_policy
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
    # writers drop a failed tag write: a status change never seen (with the version check an
    # order is no longer answered backwards from a kept answer whose bump was lost: (h))
    "f": [(2, "fresh"), (6, "fresh")],
    # a spraying balancer: a new order's parts fetched by three processes; the degraded memo
    # per process with the tag store down (10 heavy calls in 5 s against legacy's 7)
    "g": [(29, "load"), (36, "load")],
    # no version check: an order answered at an earlier status than its client was shown (a
    # kept answer from before a bump that lands late, a lagging source)
    "h": [(5, "backwards")],
    # the shared part cache without the user in its key: another user's fetched part
    "i": [(2, "crossing")],
    # the shared part cache serving an entry of an older content tag under the current one
    "j": [(1, "behind_tag")],
}
# what the first violation says, where the invariant alone does not show which check found it
SAYS = {"i": "carries data fetched for"}
# failures put back by an option of the run, not by a patch of the code
PUT_BACK = {"f": Options(lossy_writers=True), "g": Options(spraying_router=True)}


def one_document_policy() -> PollingPolicy:
    """The default policy with the taxi parts but `slow` fetched from totw's one document, as
    when (g) was found: each part from its own service, a part fetched on another process
    costs its own service one call it would have cost anyway, and 200 seeds of a spraying
    balancer break no load bound; a whole document fetched once per process does."""
    raw = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    for rule in raw["services"]["taxi"]["rules"]:
        if rule.get("upstream") != "orderperformerinfo":
            rule.pop("upstream", None)
    return parse_policy(raw)


# failures found on another policy than the default
POLICIES = {"g": one_document_policy}


@pytest.mark.parametrize(
    ("failure", "seed", "invariant"),
    [(failure, seed, invariant) for failure, found in FOUND.items() for seed, invariant in found],
)
def test_the_simulation_finds_it(
    monkeypatch: pytest.MonkeyPatch, failure: str, seed: int, invariant: str
) -> None:
    if failure in POLICIES:
        monkeypatch.setattr(run, "policy", POLICIES[failure])
    options = Options()
    fixed = run_seed(seed, options=options)
    assert fixed.ok, fixed.describe()
    if failure in PUT_BACK:
        options = PUT_BACK[failure]
    else:
        SWITCHES[failure](monkeypatch)
    broken = run_seed(seed, options=options)
    assert not broken.ok, f"failure ({failure}) put back, and seed {seed} found nothing"
    assert broken.violations[0].invariant == invariant, broken.describe()
    assert SAYS.get(failure, "") in broken.violations[0].message, broken.describe()

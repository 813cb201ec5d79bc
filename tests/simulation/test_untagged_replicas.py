"""A replica that names no list tag hides no order (docs/protocol.md: List tags; issue 47). Its
answer is used for the poll that asked alone and never kept: a lagging replica with no tag for
what it serves (the user's first list of the service, or a version whose bump was lost) used
to be kept by a poll that did not know the just-created order (the device's held poll, woken
by the creation's bump), and the order vanished past its created grace. Seed 52 found it; of
the 200 CI seeds with untagged replicas 8 broke `vanished` before the fix (40, 52, 62, 70,
129, 138, 139, 160), none since."""

from __future__ import annotations

import pytest

from devtools.simulation.options import Options
from devtools.simulation.run import run_seed


@pytest.mark.parametrize("seed", [40, 52, 62])
def test_a_replica_answering_no_list_tag_hides_no_order(seed: int) -> None:
    report = run_seed(seed, options=Options(untagged_replicas=True))
    assert report.ok, report.describe()

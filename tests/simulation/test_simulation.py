"""The simulation in CI: a fixed set of seeds, each ten virtual minutes of users, their
orders' lives and a schedule of faults against the real engine, listings, tag cache, waiting
polls and part service, every invariant checked on every answer, look and window
(devtools/simulation/checks.py; tests/simulation/README.md). A failing seed's report says how
to replay it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.simulation.explore import default_workers, explore
from devtools.simulation.options import Options
from devtools.simulation.run import run_seed
from devtools.simulation.vloop import Stalled, run_virtual
from tests.conftest import SUMMARY_LINES

ROOT = Path(__file__).resolve().parents[2]
# 200 runs of ten virtual minutes each: under a minute on two cores of this project's machine
CI_SEEDS = range(1, 201)
# the watch cache is on by default (ORDERS_STATE_WATCH_CACHE): while an operator can turn it
# off, the first half of the CI set runs with it off too (about 30 CPU-seconds more)
NO_WATCH_CACHE_SEEDS = range(1, 101)


@pytest.mark.long
@pytest.mark.cpu_bound
def test_every_invariant_holds_on_every_seed(request: pytest.FixtureRequest) -> None:
    """With the defaults, the watch cache on: every poll held from its client's last look is
    checked against a fresh look made at that moment (`watch_cache`)."""
    one = request.config.getoption("--seed", default=None)
    if one is not None:
        report = run_seed(one)
        print(report.describe())
        assert report.ok, report.describe()
        return
    count = request.config.getoption("--seeds", default=None)
    seeds = range(1, count + 1) if count is not None else CI_SEEDS
    exploration = explore(seeds, workers=default_workers())
    SUMMARY_LINES.append(f"simulation: {exploration.summary()}")
    if exploration.failed:
        pytest.fail(f"{exploration.failed[0].report}\n\n{exploration.summary()}", pytrace=False)


@pytest.mark.long
@pytest.mark.cpu_bound
def test_every_invariant_holds_on_every_seed_with_the_watch_cache_off() -> None:
    """With the watch cache off every waiting poll looks: a lost wake-up costs one wait."""
    exploration = explore(
        NO_WATCH_CACHE_SEEDS, workers=default_workers(), options=Options(watch_cache=False)
    )
    SUMMARY_LINES.append(f"simulation, watch cache off: {exploration.summary()}")
    if exploration.failed:
        pytest.fail(f"{exploration.failed[0].report}\n\n{exploration.summary()}", pytrace=False)


def test_a_seed_is_the_same_run_every_time() -> None:
    # 40 has a replica restarted mid-run: held polls answered at once, in a set's order
    seed = 40
    digest = run_seed(seed).digest()
    assert run_seed(seed).digest() == digest
    # another process, with another hash seed (set iteration order): the same run
    script = f"from devtools.simulation.run import run_seed; print(run_seed({seed}).digest())"
    other = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert other.stdout.strip() == digest


def test_virtual_time_passes_without_sleeping() -> None:
    async def ten_minutes(_: object) -> float:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(600)
        return loop.time()

    started = time.perf_counter()
    assert run_virtual(ten_minutes) == pytest.approx(600)
    assert time.perf_counter() - started < 1


def test_a_run_that_would_hang_fails_at_once() -> None:
    async def forever(_: object) -> None:
        await asyncio.Event().wait()

    with pytest.raises(Stalled):
        run_virtual(forever)

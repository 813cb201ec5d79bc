"""Options of the simulation's tests: `--seeds N` explores seeds 1..N instead of the CI set,
`--seed S` replays one seed with its whole report. They are read where the simulation's tests
run alone (pytest tests/simulation ...); a run of the whole suite uses the CI set."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("simulation", "the simulation (tests/simulation/README.md)")
    group.addoption(
        "--seeds",
        type=int,
        default=None,
        help="explore seeds 1..N instead of the CI set",
    )
    group.addoption(
        "--seed",
        type=int,
        default=None,
        help="replay one seed: its schedule, its first broken invariant, the answers around it",
    )

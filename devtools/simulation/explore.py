"""Many seeds at once, in this process or in worker processes, and what each came to."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from devtools.simulation.options import DEFAULT_OPTIONS, Options
from devtools.simulation.run import run_seed


@dataclass(frozen=True)
class Outcome:
    """One run, as a summary a worker process can send back."""

    seed: int
    ok: bool
    answers: int
    # invariant → how many times it broke
    broken: dict[str, int]
    # the whole report (schedule, first violation, the answers around it) when not ok
    report: str


def outcome(seed: int, options: Options = DEFAULT_OPTIONS) -> Outcome:
    report = run_seed(seed, options=options)
    broken = Counter(v.invariant for v in report.violations)
    return Outcome(
        seed, report.ok, report.answers, dict(broken), "" if report.ok else report.describe()
    )


@dataclass(frozen=True)
class Exploration:
    outcomes: list[Outcome]
    seconds: float

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def runs_per_second(self) -> float:
        return len(self.outcomes) / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        broken: Counter[str] = Counter()
        for one in self.failed:
            broken.update(one.broken)
        line = (
            f"{len(self.outcomes)} runs in {self.seconds:.1f} s "
            f"({self.runs_per_second:.2f} runs/s), {len(self.failed)} failed"
        )
        if self.failed:
            seeds = ", ".join(str(o.seed) for o in self.failed[:20])
            line += f": seeds {seeds}; invariants broken: {dict(sorted(broken.items()))}"
        return line


def explore(
    seeds: Iterable[int], *, workers: int = 1, options: Options = DEFAULT_OPTIONS
) -> Exploration:
    """Every seed's run. With `workers` > 1 the runs go to that many processes, started
    afresh (a run depends on its seed alone, not on the process it runs in)."""
    chosen: Sequence[int] = list(seeds)
    started = time.perf_counter()
    if workers <= 1 or len(chosen) < 2:
        outcomes = [outcome(seed, options) for seed in chosen]
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            outcomes = list(pool.map(outcome, chosen, [options] * len(chosen), chunksize=4))
    return Exploration(outcomes, time.perf_counter() - started)


def default_workers() -> int:
    """One worker per core this process may run on, at most two: a shared CI machine's."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return max(1, min(2, available))

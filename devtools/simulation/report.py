"""What a run reports: its violations, its trace around the first, its counts, and a digest
that two runs are the same run by."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

from devtools.simulation.scenario import Scenario
from devtools.simulation.trace import Trace, Violation


@dataclass
class Report:
    seed: int
    scenario: Scenario
    violations: list[Violation]
    trace: Trace
    answers: int
    looks: int
    calls: int
    virtual_s: float

    @property
    def ok(self) -> bool:
        return not self.violations

    def digest(self) -> str:
        """The run's events, in an order that does not depend on the order the loop woke
        tasks due at the same virtual instant (a process's waiting polls, answered at once on
        shutdown, in the order of a set): equal digests, the same run."""
        lines = sorted(event.line() for event in self.trace.events)
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()

    def describe(self) -> str:
        if self.ok:
            return f"seed {self.seed}: ok ({self.answers} answers, {self.looks} looks)"
        first = self.violations[0]
        counts = Counter(v.invariant for v in self.violations)
        lines = [
            f"seed {self.seed}: {len(self.violations)} violations "
            f"({', '.join(f'{name} {n}' for name, n in sorted(counts.items()))})",
            f"replay: pytest tests/simulation/test_simulation.py --seed {self.seed}  "
            f"(or python -m devtools.simulation --seed {self.seed})",
            "",
            self.scenario.describe(),
            "",
            f"first broken invariant, at {first.t:.3f} s: {first.invariant}: {first.message}",
            "what happened around it:",
            *self.trace.around(first.t, first.user_id),
        ]
        return "\n".join(lines)

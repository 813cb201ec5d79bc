"""A service run with settings built in Python on top of its environment: how the tests,
benchmarks and dev tools run a service process with a number no operator sets (a min TTL of
0 for a test's stack, joined tag reads off for a benchmark's comparison). The services
themselves read only the operator's variables (docs/configuration.md).

    python -m devtools.serve services.orders_state '{"protocol": {"min_ttl_s": 0}}'

With MLUTP_CPROFILE_DIR set, SIGUSR1 starts cProfile in the process and the next SIGUSR1
stops it and writes `<service>-<pid>-<n>.pstats` there: a benchmark profiles exactly its
window (benchmarks/waiting_cost.py --cprofile), with every Python function's own time, which
py-spy's sampling of a mostly idle process does not give reliably.
"""

from __future__ import annotations

import cProfile
import importlib
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def serve_args(module: str, overrides: Mapping[str, Any]) -> list[str]:
    """The arguments after `python` that run `module` with these settings."""
    return ["-m", "devtools.serve", module, json.dumps(overrides)]


def profile_on_signal(directory: Path, name: str) -> None:
    """SIGUSR1 toggles a cProfile of the whole process; each stop writes its stats."""
    directory.mkdir(parents=True, exist_ok=True)
    profiles: list[cProfile.Profile] = []
    windows = 0

    def toggle(signum: int, frame: object) -> None:
        nonlocal windows
        if profiles:
            profile = profiles.pop()
            profile.disable()
            windows += 1
            profile.dump_stats(directory / f"{name}-{os.getpid()}-{windows}.pstats")
        else:
            profile = cProfile.Profile()
            profiles.append(profile)
            profile.enable()

    signal.signal(signal.SIGUSR1, toggle)


def main(argv: Sequence[str]) -> None:
    module, overrides = argv[0], json.loads(argv[1]) if len(argv) > 1 else {}
    if directory := os.environ.get("MLUTP_CPROFILE_DIR"):
        profile_on_signal(Path(directory), module.rsplit(".", 1)[-1])
    importlib.import_module(f"{module}.__main__").main(overrides)


if __name__ == "__main__":
    main(sys.argv[1:])

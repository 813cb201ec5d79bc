"""A service run with settings built in Python on top of its environment: how the tests,
benchmarks and dev tools run a service process with a number no operator sets (a min TTL of
0 for a test's stack, joined tag reads off for a benchmark's comparison). The services
themselves read only the operator's variables (docs/configuration.md).

    python -m devtools.serve services.orders_state '{"protocol": {"min_ttl_s": 0}}'
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def serve_args(module: str, overrides: Mapping[str, Any]) -> list[str]:
    """The arguments after `python` that run `module` with these settings."""
    return ["-m", "devtools.serve", module, json.dumps(overrides)]


def main(argv: Sequence[str]) -> None:
    module, overrides = argv[0], json.loads(argv[1]) if len(argv) > 1 else {}
    importlib.import_module(f"{module}.__main__").main(overrides)


if __name__ == "__main__":
    main(sys.argv[1:])

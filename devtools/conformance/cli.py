"""`mlutp conformance`: its arguments, and the run."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from devtools.conformance.clients import ClientUnderTest, ExternalClient, PythonClient
from devtools.conformance.runner import run
from devtools.conformance.scenarios import SCENARIOS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client",
        choices=("python", "external"),
        default="python",
        help="python: the reference client, run here; external: an app you run yourself, "
        "pointed at the URLs the kit prints",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        default=[],
        help="run this scenario (again for more); all by default",
    )
    parser.add_argument("--report", type=Path, help="write the JSON report here")


def main(args: argparse.Namespace) -> int:
    names = args.scenario or list(SCENARIOS)
    with tempfile.TemporaryDirectory(prefix="mlutp-conformance-") as state_dir:
        client: ClientUnderTest = (
            PythonClient(Path(state_dir)) if args.client == "python" else ExternalClient()
        )
        return run(client, names, args.report)

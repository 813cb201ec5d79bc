"""`mlutp conformance`: its arguments, and the run."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from devtools.conformance.browser import BrowserClient, NoBrowser, find_browser
from devtools.conformance.clients import ClientUnderTest, ExternalClient, PythonClient
from devtools.conformance.runner import run
from devtools.conformance.scenarios import SCENARIOS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client",
        choices=("python", "browser", "external"),
        default="python",
        help="python: the reference client, run here; browser: the JS reference client in "
        "headless Chromium; external: an app you run yourself, pointed at the URLs the kit "
        "prints",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        default=[],
        help="run this scenario (again for more); all by default",
    )
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument(
        "--change-deadline-s",
        type=float,
        default=15.0,
        help="an external app's deadline for a user change to show (the design's default: 15)",
    )


def main(args: argparse.Namespace) -> int:
    names = args.scenario or list(SCENARIOS)
    with tempfile.TemporaryDirectory(prefix="mlutp-conformance-") as work_dir:
        client: ClientUnderTest
        if args.client == "python":
            client = PythonClient(Path(work_dir))
        elif args.client == "browser":
            try:
                find_browser()
            except NoBrowser as exc:
                print(exc, file=sys.stderr)
                return 2
            client = BrowserClient()
        else:
            client = ExternalClient(args.change_deadline_s)
        return run(client, names, args.report, Path(work_dir))

"""Each spec in openapi/ passes Redocly's lint under openapi/redocly.yaml (its recommended rules,
strict: a warning fails too), with the CLI openapi/package-lock.json pins, installed into
openapi/node_modules by `npm ci` when it is not there. Without npm the test skips and says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.openapi_specs import FOLDER, SPECS

CLI = FOLDER / "node_modules" / "@redocly" / "cli"


def installed_redocly() -> str:
    """The pinned CLI's entry point, installed by `npm ci` when it is not."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm not found: the specs are linted with @redocly/cli from npm")
    pinned = json.loads((FOLDER / "package.json").read_text())["devDependencies"]["@redocly/cli"]
    installed = CLI / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != pinned:
        ran = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=FOLDER,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
    return str(CLI / "bin" / "cli.js")


def test_every_spec_lints_clean() -> None:
    cli = installed_redocly()
    node = shutil.which("node")
    assert node is not None  # npm comes with node
    # no telemetry sent and no update check from a test run
    env = {**os.environ, "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"}
    ran = subprocess.run(
        [node, cli, "lint", "--format=stylish"],
        cwd=FOLDER,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    said = ran.stdout + ran.stderr
    assert ran.returncode == 0, said
    # redocly.yaml names every spec: one left out of it would be linted by nobody
    for name in SPECS:
        assert f"{name}.yaml" in said, said

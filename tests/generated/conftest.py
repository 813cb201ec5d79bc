"""The clients generated from openapi/client.yaml, the app teams' spec, talk to a stack of real
processes: `mlutp run` on free ports, its own embedded Redis, the emulator's driver off (the
tests make every change, through the emulator's API, which is not in the client spec)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.openapi_specs import spec, spec_path
from tests.stack_process import StackProcess

OPENAPI = spec_path("client")


def openapi_document() -> dict[str, Any]:
    return spec("client")


def schema_names() -> set[str]:
    """The named schemas (components/schemas): the only models a generator should make."""
    return set(openapi_document()["components"]["schemas"])


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], dict[str, Any]]
) -> tuple[Path, dict[str, Any]]:
    """`make(folder)` run once in a test run, its record (JSON) kept beside what it wrote: a
    generator's run (Java's is about 20 s) is not repeated by every pytest-xdist worker whose
    tests need it. The workers' temp dirs share a parent, where the first one makes it under
    a lock and the others wait for it and read its record."""
    root = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = root.parent
    folder = root / name
    record = root / f"{name}.json"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            folder.mkdir(exist_ok=True)
            record.write_text(json.dumps(make(folder)))
    made: dict[str, Any] = json.loads(record.read_text())
    return folder, made


@pytest.fixture(scope="module")
def stack() -> Iterator[StackProcess]:
    with StackProcess({"EMULATOR_DRIVER_ENABLED": "false"}) as running:
        yield running

"""The clients generated from openapi.yaml talk to a stack of real processes: `mlutp run` on
free ports, its own embedded Redis, the emulator's driver off (the tests make every change)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.stack_process import StackProcess

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "openapi.yaml"


def openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(OPENAPI.read_text())
    return document


def schema_names() -> set[str]:
    """The named schemas (components/schemas): the only models a generator should make."""
    return set(openapi_document()["components"]["schemas"])


@pytest.fixture(scope="module")
def stack() -> Iterator[StackProcess]:
    with StackProcess({"EMULATOR_DRIVER_ENABLED": "false"}) as running:
        yield running

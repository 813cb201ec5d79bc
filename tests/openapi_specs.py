"""The OpenAPI documents in openapi/, one per audience, as the tests read them: client.yaml
(what an app calls through the gateway), order_tags.yaml (internal), emulator.yaml
(development only) and operations.yaml (every service's /ping and /metrics)."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "openapi"
SPECS = ("client", "order_tags", "emulator", "operations")
# the spec of each service's own API (operations.yaml holds every service's /ping and /metrics)
SPEC_OF_SERVICE = {
    "launch": "client",
    "orders_state": "client",
    "order_tags": "order_tags",
    "emulator": "emulator",
}
OPERATIONS_PATHS = frozenset({"/ping", "/metrics"})
# the client spec's scheme for the user header the gateway sets
USER_SCHEME = "userHeader"


def spec_path(name: str) -> Path:
    return FOLDER / f"{name}.yaml"


@cache
def _loaded(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(spec_path(name).read_text())
    return document


def spec(name: str) -> dict[str, Any]:
    """The document, a copy of its own: a test may change what it is given."""
    return copy.deepcopy(_loaded(name))


def service_spec(service: str) -> dict[str, Any]:
    return spec(SPEC_OF_SERVICE[service])


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(method, path) → operation, every operation of the document."""
    return {
        (method, path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }


def takes_the_user(document: dict[str, Any], operation: dict[str, Any]) -> bool:
    """Whether the operation takes the user in X-Yandex-UID: by the gateway's security
    scheme (the client spec) or as a header parameter (the emulator's upstreams)."""
    security = operation.get("security", document.get("security", []))
    if any(USER_SCHEME in requirement for requirement in security):
        return True
    parameters = operation.get("parameters", [])
    return any(p.get("$ref") == "#/components/parameters/YandexUid" for p in parameters)

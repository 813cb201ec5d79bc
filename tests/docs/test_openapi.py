"""openapi.yaml is valid OpenAPI 3.1 and names every route every app registers."""

from __future__ import annotations

from pathlib import Path

import yaml
from aiohttp import web
from openapi_spec_validator import validate

from emulator.documents import LIFECYCLES
from tests.apps import all_apps

ROOT = Path(__file__).resolve().parents[2]


def load_openapi() -> dict:
    return yaml.safe_load((ROOT / "openapi.yaml").read_text())


def test_openapi_is_valid_3_1() -> None:
    document = load_openapi()
    assert document["openapi"].startswith("3.1")
    validate(document)


def registered_routes(app: web.Application) -> set[tuple[str, str]]:
    routes = set()
    for route in app.router.routes():
        if route.method in ("HEAD", "*"):
            continue
        info = route.resource.get_info() if route.resource else {}
        path = info.get("path") or info.get("formatter")
        routes.add((route.method.lower(), path))
    return routes


def test_every_registered_route_is_documented() -> None:
    paths = load_openapi()["paths"]
    documented = {(method, path) for path, item in paths.items() for method in item}
    for name, app in all_apps():
        missing = registered_routes(app) - documented
        assert not missing, f"{name}: routes missing from openapi.yaml: {sorted(missing)}"


def test_the_statuses_an_order_can_be_created_in_are_each_services_lifecycle() -> None:
    schemas = load_openapi()["components"]["schemas"]
    for service, lifecycle in LIFECYCLES.items():
        status = schemas[f"Create{service.capitalize()}Order"]["properties"]["status"]
        assert status["oneOf"][1]["enum"] == list(lifecycle), service

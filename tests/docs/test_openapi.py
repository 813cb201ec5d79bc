"""The specs in openapi/, one per audience, are each valid OpenAPI 3.1 and document exactly the
routes their services register: client.yaml what an app calls through the gateway (launch and
orders_state, as the ingress routes them), order_tags.yaml and emulator.yaml their service's,
operations.yaml every service's /ping and /metrics. Each names its license, where its servers
are and how a caller authenticates; a schema two specs define is the same in both."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import yaml
from aiohttp import web
from openapi_spec_validator import validate

from emulator.documents import LIFECYCLES
from tests.apps import all_apps
from tests.openapi_specs import (
    OPERATIONS_PATHS,
    ROOT,
    SPEC_OF_SERVICE,
    SPECS,
    USER_SCHEME,
    operations,
    spec,
)

INGRESS = ROOT / "deploy" / "k8s" / "base" / "ingress.yaml"


@pytest.mark.parametrize("name", SPECS)
def test_each_spec_is_valid_3_1(name: str) -> None:
    document = spec(name)
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


def routes_by_service() -> dict[str, set[tuple[str, str]]]:
    return {name: registered_routes(app) for name, app in all_apps()}


def test_each_service_s_routes_are_its_own_spec_s_and_operations() -> None:
    served = routes_by_service()
    documented = {name: set(operations(spec(name))) for name in SPECS}
    for service, routes in served.items():
        common = {route for route in routes if route[1] in OPERATIONS_PATHS}
        own = routes - common
        name = SPEC_OF_SERVICE[service]
        missing = own - documented[name]
        assert not missing, f"{service}: routes missing from openapi/{name}.yaml: {sorted(missing)}"
        assert common == documented["operations"], service
    # and nothing documented that its services do not serve
    served_by_spec: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for service, routes in served.items():
        served_by_spec[SPEC_OF_SERVICE[service]] |= routes
    for name, routes in served_by_spec.items():
        phantom = documented[name] - routes
        assert not phantom, f"openapi/{name}.yaml documents what nothing serves: {phantom}"
        elsewhere = {route for route in documented[name] if route[1] in OPERATIONS_PATHS}
        assert not elsewhere, f"openapi/{name}.yaml: /ping and /metrics are operations.yaml's"


def ingress_rules() -> list[tuple[str, str, str]]:
    """(path, pathType, service) of each rule of the Kubernetes ingress, the apps' way in."""
    ingress = next(d for d in yaml.safe_load_all(INGRESS.read_text()) if d["kind"] == "Ingress")
    return [
        (one["path"], one["pathType"], one["backend"]["service"]["name"].replace("-", "_"))
        for rule in ingress["spec"]["rules"]
        for one in rule["http"]["paths"]
    ]


def routed_to(path: str, rules: list[tuple[str, str, str]]) -> str | None:
    for rule_path, kind, service in rules:
        prefix = rule_path.rstrip("/") + "/"
        if path == rule_path or (kind == "Prefix" and path.startswith(prefix)):
            return service
    return None


def test_the_client_spec_is_what_the_gateway_routes_to_the_service_that_serves_it() -> None:
    rules = ingress_rules()
    served = routes_by_service()
    for method, path in operations(spec("client")):
        service = routed_to(path, rules)
        assert service is not None, f"{path}: the ingress does not route it"
        assert (method, path) in served[service], f"{path}: routed to {service}, not served there"
    # and nothing the gateway routes to an app is left out of it
    client = {path for _, path in operations(spec("client"))}
    for service in ("launch", "orders_state"):
        for _, path in served[service]:
            if routed_to(path, rules) == service:
                assert path in client, f"{path}: routed to {service}, not in client.yaml"


def test_the_statuses_an_order_can_be_created_in_are_each_services_lifecycle() -> None:
    schemas = spec("emulator")["components"]["schemas"]
    for service, lifecycle in LIFECYCLES.items():
        status = schemas[f"Create{service.capitalize()}Order"]["properties"]["status"]
        assert status["oneOf"][1]["enum"] == list(lifecycle), service


def test_a_schema_two_specs_define_is_the_same_in_each() -> None:
    defined: dict[str, dict[str, Any]] = defaultdict(dict)
    for name in SPECS:
        for schema, body in spec(name)["components"].get("schemas", {}).items():
            defined[schema][name] = body
    for schema, where in defined.items():
        first, *others = where.items()
        for name, body in others:
            assert body == first[1], f"{schema}: {first[0]}.yaml and {name}.yaml differ"


@pytest.mark.parametrize("name", SPECS)
def test_each_spec_names_its_license_its_servers_and_its_security(name: str) -> None:
    document = spec(name)
    assert document["info"]["license"]["name"]
    assert document["servers"] and all(server["description"] for server in document["servers"])
    schemes = document.get("components", {}).get("securitySchemes", {})
    for (method, path), operation in operations(document).items():
        security = operation.get("security", document.get("security"))
        assert security is not None, f"{name}.yaml {method} {path}: no security said"
        named = {scheme for requirement in security for scheme in requirement}
        assert named <= set(schemes), f"{name}.yaml {method} {path}: {named - set(schemes)}"


def test_the_client_authenticates_by_the_gateway_s_user_header() -> None:
    document = spec("client")
    assert document["components"]["securitySchemes"][USER_SCHEME] | {"description": ""} == {
        "type": "apiKey",
        "in": "header",
        "name": "X-Yandex-UID",
        "description": "",
    }
    assert document["security"] == [{USER_SCHEME: []}]
    for (method, path), operation in operations(document).items():
        assert "security" not in operation, f"{method} {path}: the user header is every call's"
        names = {p.get("name") for p in operation.get("parameters", [])}
        assert "X-Yandex-UID" not in names, f"{method} {path}: the scheme carries it"
    assert spec("order_tags")["components"]["securitySchemes"]["serviceToken"]["scheme"] == "bearer"

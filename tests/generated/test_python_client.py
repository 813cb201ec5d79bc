"""openapi/client.yaml as a team that generates its client reads it: openapi-python-client makes
a Python client of it with no warning, and that client, imported from where it was generated
(no request to the BFF here is written by hand; the orders are made through the emulator's
API, which is not in the client spec), launches, polls (a 200, then a 204 for its
answer_tag), fetches every part endpoint of the default policy and the route from a stack of
real processes, each answer parsed into the generated models. The user goes in the header the
spec's security scheme names, set once on the generated AuthenticatedClient."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests

from shared.policy import PartEndpoint, load_policy
from tests.conftest import SUMMARY_LINES
from tests.generated.conftest import OPENAPI, once_per_run, openapi_document, schema_names
from tests.stack_process import StackProcess

PACKAGE = "mlutp_generated_client"
POLICY = load_policy()
SERVICES = list(POLICY.services)
# an order of a service no server serves: it is answered stale
STALE_SERVICE = "pharmacy"


@dataclass(frozen=True)
class Generated:
    root: Path  # the folder that holds the package
    output: str  # everything the generator printed


def generate(root: Path) -> dict[str, Any]:
    """The client package in `root`, and what the generator said."""
    config = root / "config.yaml"
    config.write_text(
        f"project_name_override: mlutp-generated-client\npackage_name_override: {PACKAGE}\n"
    )
    venv_bin = Path(sys.executable).parent
    # the generator formats what it wrote with ruff, found on PATH: the venv's
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    started = time.monotonic()
    ran = subprocess.run(
        [
            str(venv_bin / "openapi-python-client"),
            "generate",
            "--path",
            str(OPENAPI),
            "--output-path",
            str(root / PACKAGE),
            "--config",
            str(config),
            "--meta",
            "none",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    SUMMARY_LINES.append(f"openapi-python-client: {time.monotonic() - started:.1f} s")
    return {"returncode": ran.returncode, "output": ran.stdout + ran.stderr}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    """The client generated once for the run."""
    root, made = once_per_run(tmp_path_factory, "python_client", generate)
    assert made["returncode"] == 0, made["output"]
    return Generated(root, made["output"])


@pytest.fixture(scope="module")
def client_package(generated: Generated) -> Iterator[ModuleType]:
    """The generated package, imported from the folder it was generated into (and forgotten
    after the module: nothing else sees it)."""
    sys.path.insert(0, str(generated.root))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(generated.root))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).replace(" ", "_").lower()


def operation(path: str, method: str = "post") -> ModuleType:
    """The generated module of the operation at `path`: api/<first tag>/<operationId>."""
    spec = openapi_document()["paths"][path][method]
    return importlib.import_module(
        f"{PACKAGE}.api.{snake(spec['tags'][0])}.{snake(spec['operationId'])}"
    )


def models() -> Any:
    return importlib.import_module(f"{PACKAGE}.models")


@dataclass(frozen=True)
class UserOrders:
    user: str
    orderids: dict[str, str]  # service → the user's order of it


@pytest.fixture(scope="module")
def user_orders(stack: StackProcess) -> UserOrders:
    """One order of each service for a new user, made through the emulator's API (taxi
    driving, so it has a route)."""
    user = f"generated-{uuid.uuid4().hex[:12]}"
    statuses = {"taxi": "driving", "eats": None, "grocery": None}
    orderids = {}
    for service, status in statuses.items():
        body = {"user_id": user, "service": service}
        if status is not None:
            body["status"] = status
        url = f"{stack.url('emulator')}/emulator/v1/orders"
        created = requests.post(url, json=body, timeout=30)
        assert created.status_code == 200, created.text
        orderids[service] = created.json()["orderid"]
    return UserOrders(user, orderids)


@pytest.fixture(scope="module")
def clients(
    client_package: ModuleType, stack: StackProcess, user_orders: UserOrders
) -> dict[str, Any]:
    """A client of launch and one of orders_state, each sending the user in the header the
    spec's security scheme names (the generator leaves an apiKey scheme to the caller)."""
    scheme = openapi_document()["components"]["securitySchemes"]["userHeader"]
    assert (scheme["type"], scheme["in"]) == ("apiKey", "header")
    return {
        name: client_package.AuthenticatedClient(
            base_url=stack.url(name),
            token=user_orders.user,
            prefix="",
            auth_header_name=scheme["name"],
            timeout=30.0,
            raise_on_unexpected_status=True,
        )
        for name in ("launch", "orders_state")
    }


def test_the_generator_warns_of_nothing_and_names_only_named_schemas(
    generated: Generated, client_package: ModuleType
) -> None:
    warnings = [line for line in generated.output.splitlines() if "warn" in line.lower()]
    assert not warnings, generated.output
    # every model class is a schema of components/schemas (enums aside, each named after
    # its property): no inline object the generator had to name
    m = models()
    classes = [getattr(m, name) for name in m.__all__]
    unnamed = {c.__name__ for c in classes if not issubclass(c, Enum)} - schema_names()
    assert not unnamed, f"models of inline objects: {sorted(unnamed)}"


def test_launch_then_the_poll_200_and_204_parse_into_their_models(
    clients: dict[str, Any], user_orders: UserOrders
) -> None:
    m = models()
    taxi = user_orders.orderids["taxi"]
    launched = operation("/4.0/launch").sync_detailed(
        client=clients["launch"],
        body=m.LaunchRequest(supported_services=SERVICES),
    )
    assert launched.status_code == 200, launched.content
    state = launched.parsed.mlutp_orders_state
    assert isinstance(state, m.LaunchOrdersState)
    by_id = {order.orderid: order for order in state.orders}
    assert set(by_id) == set(user_orders.orderids.values())
    assert all(isinstance(order, m.ActualOrder) for order in state.orders)
    order = by_id[taxi]
    assert (order.service, order.status) == ("taxi", "driving")
    assert order.update_status == m.ActualOrderUpdateStatus.ACTUAL
    # nothing fetched yet: no tags, every required part to fetch
    assert order.tags.to_dict() == {}
    assert "fast_info" in order.need_request
    assert {rule.url for rule in state.polling_policy} == {
        rule.url for service in SERVICES for rule in POLICY.services[service].rules
    }
    assert {changes.service for changes in state.allowed_changes} == set(SERVICES)

    # the poll: the taxi order, and one of a service no server serves (answered stale)
    known = [
        m.KnownOrder(
            orderid=taxi,
            service="taxi",
            status=order.status,
            tags=m.ClientTags.from_dict(order.tags.to_dict()),
        ),
        m.KnownOrder(orderid="gone-1", service=STALE_SERVICE, status="delivering"),
    ]
    poll = operation("/mlutp/v1/orders/state")
    body = m.OrdersStateRequest(known_orders=known)
    polled = poll.sync_detailed(client=clients["orders_state"], body=body)
    assert polled.status_code == 200, polled.content
    assert isinstance(polled.parsed, m.PolledOrdersState)
    actual, stale = polled.parsed.orders
    assert isinstance(actual, m.ActualOrder) and actual.orderid == taxi
    assert actual.need_request == order.need_request
    assert isinstance(stale, m.StaleOrder)
    assert (stale.orderid, stale.service) == ("gone-1", STALE_SERVICE)
    assert stale.update_status == m.StaleOrderUpdateStatus.STALE and stale.need_request == []
    assert polled.parsed.policy_versions.to_dict() == {"taxi": POLICY.version("taxi")}
    assert "ETag" not in polled.headers

    # the answer_tag sent back: nothing new is a 204, no body, and no error to the client
    held = m.OrdersStateRequest(known_orders=known, answer_tag=polled.parsed.answer_tag)
    again = poll.sync_detailed(client=clients["orders_state"], body=held)
    assert again.status_code == 204, again.content
    assert again.parsed is None and again.content == b""
    assert int(again.headers["X-Yataxi-Polling-Interval-Ms"]) > 0


@pytest.mark.parametrize("endpoint", POLICY.endpoints, ids=lambda e: e.rule.url)
def test_every_part_endpoint_answers_a_document_and_an_error_into_their_models(
    clients: dict[str, Any], user_orders: UserOrders, endpoint: PartEndpoint
) -> None:
    m = models()
    rule = endpoint.rule
    orderid = user_orders.orderids[endpoint.service]
    fetch = operation(rule.url)
    if rule.tag_defined:
        # the user's order and one nobody has: a document, and the error branch
        body = m.PartRequest(
            orders=[m.PartRequestOrder(orderid=orderid), m.PartRequestOrder(orderid="nobodys")]
        )
        answer = fetch.sync_detailed(client=clients["orders_state"], body=body)
        assert answer.status_code == 200, answer.content
        assert isinstance(answer.parsed, m.PartResults)
        document, error = answer.parsed.orders
        assert isinstance(error, m.PartError) and error.orderid == "nobodys"
        assert error.error.update_status == m.PartErrorDetailUpdateStatus.EXPIRED
    else:
        answer = fetch.sync_detailed(
            client=clients["orders_state"],
            body=m.RoutePartRequest(orderid=orderid),
        )
        assert answer.status_code == 200, answer.content
        document = answer.parsed
    assert isinstance(document, m.PartDocument)
    assert document.orderid == orderid and document.tag
    # the part's fields, as the generated model keeps them: some of the rule's, no others
    fields = set(document.additional_properties)
    assert fields and fields <= set(rule.fields), (rule.url, sorted(fields))


def test_the_legacy_pass_through_answers_the_order_document_into_its_model(
    clients: dict[str, Any], user_orders: UserOrders
) -> None:
    m = models()
    taxi = user_orders.orderids["taxi"]
    answer = operation("/3.0/taxiontheway").sync_detailed(
        client=clients["orders_state"], body=m.UpstreamOrderRequest(orderid=taxi)
    )
    assert answer.status_code == 200, answer.content
    assert isinstance(answer.parsed, m.OrderDocument)
    assert answer.parsed.additional_properties["orderid"] == taxi

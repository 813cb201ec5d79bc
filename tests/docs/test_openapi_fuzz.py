"""Schemathesis against each service with its own spec in openapi/ (client.yaml against launch
and orders_state, order_tags.yaml, emulator.yaml), on a stack of real processes the test
starts: no 5xx, and schema and server agree both ways (an answer the schema does not describe
fails, and so does a request the schema allows that a server refuses, or one it forbids that a
server takes). The client spec's security scheme, the user header, is given a well-formed
user, as the gateway sets it. operations.yaml (/ping, /metrics: no input) is left out.
`-m "not fuzz"` skips it locally; CI runs it."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case, GenerationMode

from devtools.stack import STACK
from tests.conftest import report_statuses
from tests.openapi_specs import spec_path
from tests.stack_process import StackProcess

TOKEN = "fuzz-token"
# bounded: examples per operation per mode; CI and a developer's run draw the same number. 50
# (was 100): the fuzz was a fifth of the whole suite's CPU (124 of ~630 CPU-seconds), and its
# boundary cases come on top of the count; MLUTP_FUZZ_EXAMPLES=100 (or more) for a deeper run
EXAMPLES = int(os.environ.get("MLUTP_FUZZ_EXAMPLES", "50"))


def load(name: str) -> schemathesis.schemas.BaseSchema:
    schema = schemathesis.openapi.from_path(spec_path(name))
    schema.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=EXAMPLES
    )
    # a schema-violating body over 64 KiB is refused by its size, before its shape: 413
    schema.config.checks.negative_data_rejection.expected_statuses.append("413")
    schema.hook(filter_body)
    return schema


# integer fields of the request bodies: JSON Schema counts 2.0 as an integer, the services'
# decoders (msgspec, strict) do not, and JSON Schema cannot say "no fraction part"
INTEGER_FIELDS = frozenset(
    {
        "wait_ms",
        "version",
        "requested_at_ms",
        "rating",
        "delay_ms",
        "max_age_ms",
        "force_per_minute",
        "distance_left_m",
    }
)


def filter_body(context: schemathesis.HookContext, body: object) -> bool:
    """Leaves out the two requests the schema can refuse only in words: an order listed twice
    by orderid and service (in known_orders, or a part request's orders: a 400, covered by
    tests/services), and an integer sent as 2.0."""
    if not isinstance(body, dict):
        return True
    # the body, and the items of a batch (keep_many's answers, tags/create's orders)
    batches = [body.get(name) for name in ("answers", "orders")]
    batched = [one for batch in batches if isinstance(batch, list) for one in batch]
    for one in [body, *batched]:
        if isinstance(one, dict) and any(isinstance(one.get(n), float) for n in INTEGER_FIELDS):
            return False
    for name in ("known_orders", "orders"):
        items = body.get(name)
        if isinstance(items, list):
            keys = [
                repr((i.get("service"), i.get("orderid"))) for i in items if isinstance(i, dict)
            ]
            if len(keys) != len(set(keys)):
                return False
    return True


client_api = load("client")
# the services trust the gateway's X-Yandex-UID: any well-formed value is a user, so no
# generated "invalid" one is refused (a malformed one is a 401: tests/services/test_corpus.py)
client_api.config.checks.ignored_auth.enabled = False
USER = {"X-Yandex-UID": "fuzz-user"}
order_tags_api = load("order_tags")
emulator_api = load("emulator")

pytestmark = pytest.mark.fuzz

# order_tags' writes add parts to an order, at most 32 of them: thousands of examples, many on
# the same few ids, would fill an order and see a schema-valid write refused (400
# too_many_parts) for state no schema can describe; so each example starts from no tags
TAG_WRITES = frozenset({"/v1/tags/set", "/v1/tags/create", "/v1/tags/bump"})


def orders_written(case: Case) -> list[dict[str, str]]:
    """The (service, orderid) of each order an order_tags write names."""
    body = case.body if case.operation.path in TAG_WRITES else None
    if not isinstance(body, dict):
        return []
    items = body.get("orders")
    named = [body, *(items if isinstance(items, list) else [])]
    return [
        {"service": one["service"], "orderid": one["orderid"]}
        for one in named
        if isinstance(one, dict)
        and isinstance(one.get("service"), str)
        and isinstance(one.get("orderid"), str)
    ]


@pytest.fixture(scope="module")
def stack_urls() -> Iterator[dict[str, str]]:
    # no poll waits (the waiting poll has tests of its own): a fuzzed poll of a user with no
    # news would hold for up to 25 s
    with StackProcess({"MLUTP_SERVICE_TOKEN": TOKEN, "MLUTP_MAX_WAITING": "0"}) as stack:
        yield {service.name: stack.url(service.name) for service in STACK}


@pytest.fixture(scope="module")
def statuses() -> Iterator[Counter[int]]:
    """Every answer's status, reported at the end: the note's fuzz figures."""
    counted: Counter[int] = Counter()
    yield counted
    report_statuses("schemathesis requests", counted)


@client_api.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_the_client_api_answers_as_documented(
    case: Case, stack_urls: dict[str, str], statuses: Counter[int]
) -> None:
    # the gateway's routing: launch's one path to launch, every other to orders_state
    service = "launch" if case.operation.path == "/4.0/launch" else "orders_state"
    answers_as_documented(case, stack_urls, service, statuses)


@order_tags_api.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_order_tags_answers_as_documented(
    case: Case, stack_urls: dict[str, str], statuses: Counter[int]
) -> None:
    answers_as_documented(case, stack_urls, "order_tags", statuses)


@emulator_api.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_the_emulator_answers_as_documented(
    case: Case, stack_urls: dict[str, str], statuses: Counter[int]
) -> None:
    answers_as_documented(case, stack_urls, "emulator", statuses)


def answers_as_documented(
    case: Case, stack_urls: dict[str, str], service: str, statuses: Counter[int]
) -> None:
    headers = {
        "launch": USER,
        "orders_state": USER,
        "order_tags": {"Authorization": f"Bearer {TOKEN}"},
    }.get(service)
    if case.headers and case.headers.get("Content-Encoding", "identity").lower() != "identity":
        # the fuzzer names a coding but sends the body plain, which is rightly a 400: coded
        # bodies have their own tests (tests/services/orders_state/test_request_encoding.py)
        del case.headers["Content-Encoding"]
    try:
        response = case.call(base_url=stack_urls[service], headers=headers, timeout=30)
    finally:
        for order in orders_written(case):
            requests.post(
                f"{stack_urls['order_tags']}/v1/tags/delete",
                json=order,
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=30,
            )
    statuses[response.status_code] += 1
    # every check schemathesis has: no 5xx, statuses, headers and bodies as documented, and
    # schema-valid requests accepted, schema-violating ones refused
    case.validate_response(response)

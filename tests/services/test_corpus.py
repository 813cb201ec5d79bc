"""A corpus of nasty requests (tests/data/bad_requests.json) against every POST endpoint of
every service (docs/protocol.md: Identity): each gets a 4xx with a `{"code", "message"}` JSON
body, never a 5xx, and nothing is written to Redis."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient

from emulator.app import create_app as create_emulator
from services.launch.app import create_app as create_launch
from services.launch.config import LaunchSettings
from services.order_tags.app import create_app as create_order_tags
from services.order_tags.config import OrderTagsSettings
from services.orders_state.app import create_app as create_orders_state
from services.orders_state.config import OrdersStateSettings
from shared.config import RedisSettings
from tests import raw_http
from tests.apps import ServiceTestServer
from tests.conftest import TEST_TOKEN, emulator_settings, report_statuses
from tests.emulator_api import create_order
from tests.helpers import bff_kwargs
from tests.openapi_specs import service_spec, takes_the_user

ROOT = Path(__file__).resolve().parents[2]
CORPUS_FILE = ROOT / "tests" / "data" / "bad_requests.json"
# a number too big for any JSON parser's float is kept as its text, not as inf
_RAW_NUMBER = re.compile(r'"@@(-?[0-9.eE+-]+)@@"')
# a value of each JSON type: a field gets one of a type its spec (openapi/) does not give it
VALUE_OF_TYPE = {
    "string": "12",
    "integer": 12,
    "boolean": True,
    "array": [1],
    "object": {"a": 1},
}
USER = "corpus-user"


def load_corpus() -> dict[str, Any]:
    return json.loads(
        CORPUS_FILE.read_text(), parse_float=lambda text: f"@@{text}@@"
    )  # keeps 1e400 as written


def encode(value: Any) -> bytes:
    return _RAW_NUMBER.sub(r"\1", json.dumps(value)).encode()


def raw_body(entry: dict[str, Any]) -> bytes:
    if "text" in entry:
        return str(entry["text"]).encode()
    if "hex" in entry:
        return bytes.fromhex(entry["hex"])
    prefix, opener, opens, closer, closes, suffix = entry["repeat"]
    middle = entry.get("middle", "")
    return (prefix + opener * opens + middle + closer * closes + suffix).encode()


def user_id(value: str | list[Any]) -> bytes:
    if isinstance(value, list):
        return bytes.fromhex(value[0]) * value[1]
    return bytes.fromhex(value)


def openapi_body_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    """The request body schema of `path` (first alternative of a oneOf), refs resolved."""
    body = document["paths"][path]["post"].get("requestBody")
    if body is None:
        return {}
    body = resolve(document, body)
    schema = resolve(document, body["content"]["application/json"]["schema"])
    if "oneOf" in schema:
        schema = resolve(document, schema["oneOf"][0])
    return schema


def resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def wrong_type(types: list[str]) -> Any:
    """A value of a JSON type the field does not take; None where it takes any."""
    if not types:
        return None
    taken = {*types, "integer"} if "number" in types else set(types)
    return next(value for kind, value in VALUE_OF_TYPE.items() if kind not in taken)


def field_types(document: dict[str, Any], schema: dict[str, Any], name: str) -> list[str]:
    field = resolve(document, schema.get("properties", {}).get(name, {}))
    if "allOf" in field:
        field = resolve(document, field["allOf"][0])
    types = field.get("type", [])
    return [types] if isinstance(types, str) else list(types)


@dataclass(frozen=True)
class Endpoint:
    service: str
    path: str  # as its service's spec in openapi/ names it
    url: str  # with its path parameters filled in
    user_facing: bool


@dataclass(frozen=True)
class BadRequest:
    endpoint: Endpoint
    what: str
    body: bytes
    headers: dict[bytes, bytes]


def bad_requests(
    corpus: dict[str, Any], document: dict[str, Any], endpoint: Endpoint
) -> Iterator[BadRequest]:
    entry = corpus["endpoints"].get(endpoint.path)
    if entry is None and endpoint.path.startswith("/mlutp/v"):
        entry = corpus["endpoints"]["PART"]
    assert entry is not None, f"{endpoint.path}: add it to {CORPUS_FILE.name}"
    headers = {b"X-Yandex-UID": USER.encode()} if endpoint.user_facing else {}
    if endpoint.service == "order_tags":
        headers[b"Authorization"] = f"Bearer {TEST_TOKEN}".encode()
    good_body = b"{}" if entry["base"] is None else encode(entry["base"])
    if endpoint.user_facing:
        for name, value in corpus["user_ids"].items():
            uid = {b"X-Yandex-UID": user_id(value)}
            yield BadRequest(endpoint, f"user id: {name}", good_body, uid)
    base = entry["base"]
    if base is None:
        return  # the endpoint reads no body
    for name, body in corpus["bodies"].items():
        yield BadRequest(endpoint, name, raw_body(body), headers)
    for encoding in corpus["encodings"]:
        # a plain body said to be compressed: it does not decode as its header says
        encoded = {**headers, b"Content-Encoding": encoding.encode()}
        yield BadRequest(endpoint, f"a plain body said to be {encoding}", good_body, encoded)
    schema = openapi_body_schema(document, endpoint.path)
    for field in schema.get("required", []):
        missing = {k: v for k, v in base.items() if k != field}
        yield BadRequest(endpoint, f"{field} missing", encode(missing), headers)
    for field in base:
        wrong_value = wrong_type(field_types(document, schema, field))
        if wrong_value is not None:
            body = encode({**base, field: wrong_value})
            yield BadRequest(endpoint, f"{field} of another type", body, headers)
    # a body of no fields (a cancel) has no field to repeat
    first = next(iter(base), None)
    wrong_value = None if first is None else wrong_type(field_types(document, schema, first))
    if first is not None and wrong_value is not None:
        # {"f": good, "f": bad, ...}: the decoder keeps the last, so this one is bad input
        rest = encode({k: v for k, v in base.items() if k != first})[1:-1]
        body = b"{" + encode(first) + b": " + encode(base[first])
        body += b", " + encode(first) + b": " + encode(wrong_value)
        body += (b", " + rest if rest else b"") + b"}"
        yield BadRequest(endpoint, f"{first} twice, the last bad", body, headers)
    for number, body in enumerate(entry.get("bad", [])):
        yield BadRequest(endpoint, f"bad #{number}: {encode(body)[:80]!r}", encode(body), headers)


@pytest.fixture
async def every_endpoint(
    aiohttp_client: Callable[..., Awaitable[TestClient]], redis_settings: RedisSettings
) -> list[tuple[TestClient, Endpoint]]:
    """Every POST route of the four services, each on the services' own runner, wired to
    each other as in production; path parameters name a real order of the test's user, so a
    body is checked, not a 404."""
    tags_settings = OrderTagsSettings(port=0, service_token=TEST_TOKEN, redis=redis_settings)
    order_tags = ServiceTestServer(create_order_tags(tags_settings))
    await order_tags.start_server()
    emulator_server = ServiceTestServer(create_emulator(emulator_settings(order_tags)))
    await emulator_server.start_server()
    bff = bff_kwargs(order_tags, emulator_server)
    clients = {
        "order_tags": await aiohttp_client(order_tags),
        "emulator": await aiohttp_client(emulator_server),
        "orders_state": await aiohttp_client(
            ServiceTestServer(create_orders_state(OrdersStateSettings(**bff)))
        ),
        "launch": await aiohttp_client(ServiceTestServer(create_launch(LaunchSettings(**bff)))),
    }
    emulator = clients["emulator"]
    order = await create_order(emulator, USER, status="driving")
    params = {"service": "taxi", "orderid": order["orderid"]}
    corpus = load_corpus()
    endpoints = []
    for service, client in clients.items():
        document = service_spec(service)
        for route in client.app.router.routes():
            if route.method != "POST" or route.resource is None:
                continue
            path = route.resource.canonical
            user_facing = takes_the_user(document, document["paths"][path]["post"])
            entry = corpus["endpoints"].get(path, {})
            values = {**params, **entry.get("params", {})}
            url = path.format(**values)
            endpoints.append((client, Endpoint(service, path, url, user_facing)))
    return endpoints


def redis_writes(client: redis.Redis) -> int:
    """Writes since start: Redis counts every change to its data here, saved or not."""
    return int(client.info("persistence")["rdb_changes_since_last_save"])


async def test_every_bad_request_is_a_json_4xx_and_writes_nothing(
    every_endpoint: list[tuple[TestClient, Endpoint]],
    redis_sync: redis.Redis,
) -> None:
    corpus = load_corpus()
    statuses: Counter[int] = Counter()
    problems = []
    for client, endpoint in every_endpoint:
        for bad in bad_requests(corpus, service_spec(endpoint.service), endpoint):
            writes = redis_writes(redis_sync)
            status, headers, payload = await raw_http.raw_post(
                client, endpoint.url, bad.body, bad.headers
            )
            statuses[status] += 1
            where = f"{endpoint.service} {endpoint.url} [{bad.what}]"
            if status == 404:
                # the path names a real order: a 404 means the request never reached the
                # code it is meant to test (a route or a service the path got wrong)
                problems.append(f"{where}: 404 {payload[:120]!r}")
                continue
            if not 400 <= status < 500:
                problems.append(f"{where}: {status} {payload[:120]!r}")
                continue
            try:
                error = json.loads(payload)
            except ValueError:
                problems.append(f"{where}: not JSON: {status} {payload[:120]!r}")
                continue
            if not (isinstance(error, dict) and {"code", "message"} <= set(error)):
                problems.append(f"{where}: not an error body: {payload[:120]!r}")
            if not headers.get(b"content-type", b"").startswith(b"application/json"):
                problems.append(f"{where}: content type {headers.get(b'content-type')!r}")
            if redis_writes(redis_sync) != writes:
                problems.append(f"{where}: wrote to Redis")
    report_statuses("corpus bad requests", statuses)
    assert not problems, "\n".join(problems)

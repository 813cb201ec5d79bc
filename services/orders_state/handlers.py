from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web
from aiohttp.typedefs import Handler

from services.bff.part_request import parse_part_request
from services.bff.requests import request_caller, require_user
from services.bff.resources import ADMISSION, ENGINE, LIMITS, PARTS, TOTW
from services.bff.wire import INTERVAL_HEADER, PartResponse, StateRequest, StateResponse
from services.orders_state.kept_requests import lone_digest, parsed_request
from services.orders_state.keys import KEPT_REQUESTS, MAX_PART_ORDERS
from services.orders_state.waiting.setup import WAITING
from shared import wire
from shared.answer import encode_orders
from shared.policy import PartEndpoint
from shared.protocol.answer_tag import answer_tag, nothing_new
from shared.protocol.policy_versions import versions_to_tell
from shared.protocol.request_digest import request_digest
from shared.upstream_wire import RouteRequest
from shared.web import JSON_CONTENT_TYPE, json_response, read_body, read_json

_state_request = msgspec.json.Decoder(StateRequest)
_object = msgspec.json.Decoder(dict[str, Any])
_route_request = msgspec.json.Decoder(RouteRequest)


async def orders_state(request: web.Request) -> web.Response:
    user_id = require_user(request)
    # a shed poll is refused before its body is read: the cheapest 503 there is
    request.app[ADMISSION].check()
    raw = await read_body(request)
    body = wire.decode(_state_request, raw)
    kept_requests = request.app[KEPT_REQUESTS]
    if body.request_digest is None:
        kept = parsed_request(request.app[LIMITS], body, len(raw))
        kept_requests.keep(user_id, request_digest(raw), kept)
    else:
        # the body it stands for, as parsed when it came in full (docs/protocol.md: The
        # digest request): no decode or parse of the big body again
        kept = kept_requests.resolve(user_id, lone_digest(raw))
    request.app[ENGINE].metrics.ignored_names(kept.ignored)
    poll = kept.poll(request_caller(request, user_id))
    answer = await request.app[WAITING].answer(poll, kept.body_key)
    state = StateResponse(
        encode_orders(answer.result.orders),
        answer.result.allowed_changes,
        # only what the client must change of what it named: not every poll's bytes
        versions_to_tell(answer.result.policy_versions, kept.stated_versions),
    )
    state.answer_tag = answer_tag(wire.encode(state))
    headers = {INTERVAL_HEADER: str(answer.result.interval_ms)}
    if answer.cause is not None:
        headers[wire.WAIT_HEADER] = answer.cause.value
    if nothing_new(kept.answer_tag, state.answer_tag):
        # the client holds this answer: the interval (never cached) is all it needs. A 204,
        # not a 304: this is a POST, and a 2xx passes every stock client's success check
        return web.Response(status=204, headers=headers)
    return web.Response(body=wire.encode(state), content_type=JSON_CONTENT_TYPE, headers=headers)


def part_handler(endpoint: PartEndpoint) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        user_id = require_user(request)
        body = await read_json(request, _object)
        parsed = parse_part_request(body, request.app[MAX_PART_ORDERS])
        parts = await request.app[PARTS].fetch_parts(
            endpoint, parsed.orders, parsed.other_fields, request_caller(request, user_id)
        )
        return json_response(PartResponse(parts))

    return handler


def route_handler(endpoint: PartEndpoint) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        user_id = require_user(request)
        body = await read_json(request, _route_request)
        part = await request.app[PARTS].fetch_route(
            endpoint, msgspec.to_builtins(body), request_caller(request, user_id)
        )
        return json_response(part)

    return handler


async def taxiontheway(request: web.Request) -> web.Response:
    """The legacy endpoint, passed through unchanged: old clients and the load baseline."""
    user_id = require_user(request)
    body = await request.read()
    response = await request.app[TOTW].pass_through(body, request_caller(request, user_id))
    return web.Response(
        body=response.body,
        status=response.status,
        content_type=response.headers.get("Content-Type", "application/json").split(";")[0],
    )

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web
from aiohttp.typedefs import Handler

from services.bff.known_orders import parse_poll
from services.bff.part_request import parse_part_request
from services.bff.poll import Poll
from services.bff.requests import request_caller, require_user
from services.bff.resources import ADMISSION, ENGINE, LIMITS, PARTS, TOTW
from services.bff.wire import INTERVAL_HEADER, PartResponse, StateRequest, StateResponse
from services.orders_state.keys import MAX_PART_ORDERS
from services.orders_state.waiting.setup import WAITING
from shared import wire
from shared.answer import encode_orders
from shared.policy import PartEndpoint
from shared.protocol.answer_tag import answer_tag, nothing_new
from shared.protocol.policy_versions import versions_to_tell
from shared.upstream_wire import RouteRequest
from shared.web import JSON_CONTENT_TYPE, json_response, read_json

_state_request = msgspec.json.Decoder(StateRequest)
_object = msgspec.json.Decoder(dict[str, Any])
_route_request = msgspec.json.Decoder(RouteRequest)


async def orders_state(request: web.Request) -> web.Response:
    user_id = require_user(request)
    # a shed poll is refused before its body is read: the cheapest 503 there is
    request.app[ADMISSION].check()
    body = await read_json(request, _state_request)
    parsed = parse_poll(request.app[LIMITS], body.known_orders, body.supported_services)
    request.app[ENGINE].metrics.ignored_names(parsed.ignored)
    poll = Poll(
        request_caller(request, user_id),
        parsed.known_orders,
        parsed.services,
        body.policy_versions,
        body.wait_ms,
    )
    answer = await request.app[WAITING].answer(poll)
    state = StateResponse(
        encode_orders(answer.result.orders),
        answer.result.allowed_changes,
        # only what the client must change of what it named: not every poll's bytes
        versions_to_tell(answer.result.policy_versions, body.policy_versions),
    )
    state.answer_tag = answer_tag(wire.encode(state))
    headers = {INTERVAL_HEADER: str(answer.result.interval_ms)}
    if answer.cause is not None:
        headers[wire.WAIT_HEADER] = answer.cause.value
    if nothing_new(body.answer_tag, state.answer_tag):
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

from __future__ import annotations

import msgspec
from aiohttp import web

from services.bff.known_orders import parse_known_orders, queried_services
from services.bff.resources import ENGINE, LIMITS, POLICY, upstream_headers, user_id
from services.bff.wire import INTERVAL_HEADER, StateRequest, StateResponse
from shared.web import json_response, read_json

_state_request = msgspec.json.Decoder(StateRequest)


async def orders_state(request: web.Request) -> web.Response:
    user_id(request)
    body = await read_json(request, _state_request)
    policy = request.app[POLICY]
    known = parse_known_orders(body.known_orders, policy, request.app[LIMITS])
    services = queried_services(body.supported_services, known, policy)
    result = await request.app[ENGINE].poll(known, services, upstream_headers(request))
    return json_response(
        StateResponse(result.orders, result.allowed_changes),
        headers={INTERVAL_HEADER: str(result.interval_ms)},
    )

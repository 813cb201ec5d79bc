from __future__ import annotations

import msgspec
from aiohttp import web

from services.bff.known_orders import parse_known_orders, queried_services
from services.bff.resources import ENGINE, LIMITS, POLICY, upstream_headers, user_id
from services.bff.wire import INTERVAL_HEADER, LaunchRequest, LaunchResponse, LaunchState
from shared.web import json_response, read_json

_launch_request = msgspec.json.Decoder(LaunchRequest)


async def launch(request: web.Request) -> web.Response:
    user_id(request)
    body = await read_json(request, _launch_request)
    policy = request.app[POLICY]
    known = parse_known_orders(body.known_orders, policy, request.app[LIMITS])
    services = queried_services(body.supported_services, known, policy)
    engine = request.app[ENGINE]
    result = await engine.poll(known, services, upstream_headers(request))
    # the policy only of the services the client supports
    supported = [s for s in services if s in body.supported_services]
    state = LaunchState(result.orders, result.allowed_changes, engine.policy_rules(supported))
    return json_response(LaunchResponse(state), headers={INTERVAL_HEADER: str(result.interval_ms)})

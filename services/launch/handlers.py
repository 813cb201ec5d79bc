from __future__ import annotations

import msgspec
from aiohttp import web

from services.bff.keys import ENGINE
from services.bff.requests import poll, require_user
from services.bff.wire import INTERVAL_HEADER, LaunchRequest, LaunchResponse, LaunchState
from shared.web import json_response, read_json

_launch_request = msgspec.json.Decoder(LaunchRequest)


async def launch(request: web.Request) -> web.Response:
    user_id = require_user(request)
    body = await read_json(request, _launch_request)
    services, result = await poll(request, user_id, body.known_orders, body.supported_services)
    # the policy only of the services the client supports
    supported = [s for s in services if s in body.supported_services]
    rules = request.app[ENGINE].policy_rules(supported)
    state = LaunchState(result.orders, result.allowed_changes, rules)
    return json_response(LaunchResponse(state), headers={INTERVAL_HEADER: str(result.interval_ms)})

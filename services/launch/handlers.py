from __future__ import annotations

import msgspec
from aiohttp import web

from services.bff.known_orders import parse_poll
from services.bff.poll import Poll
from services.bff.requests import request_caller, require_user
from services.bff.resources import ADMISSION, ENGINE, LIMITS, PARTS, POLICY
from services.bff.wire import INTERVAL_HEADER, LaunchRequest, LaunchResponse, LaunchState
from services.launch.extended import with_required_parts
from shared import wire
from shared.answer import encode_orders
from shared.protocol.extended_info import EXTENDED_ORDER_INFO
from shared.web import json_response, read_json

_launch_request = msgspec.json.Decoder(LaunchRequest)


async def launch(request: web.Request) -> web.Response:
    user_id = require_user(request)
    # a shed poll is refused before its body is read: the cheapest 503 there is
    request.app[ADMISSION].check()
    body = await read_json(request, _launch_request)
    for part_type, fields in body.part_parameters.items():
        wire.check_depth(fields, f"part_parameters.{part_type}")
    # launch queries only the services the client supports, and gives their policy
    parsed = parse_poll(
        request.app[LIMITS], body.known_orders, body.supported_services, only_supported=True
    )
    request.app[ENGINE].metrics.ignored_names(parsed.ignored)
    poll = Poll(
        request_caller(request, user_id), parsed.known_orders, parsed.services, body.policy_versions
    )
    with request.app[ADMISSION].admit():
        # the policy handed out: the version the client was told, where served as current or
        # announced, else the current one; its orders are decided by it
        result = await request.app[ENGINE].look(poll, handing_out=True)
    orders = result.orders
    if EXTENDED_ORDER_INFO in body.supported:
        orders = await with_required_parts(
            orders,
            request.app[PARTS],
            request.app[POLICY],
            poll,
            versions=result.policy_versions,
            sent_parameters=body.part_parameters,
        )
    rules = request.app[ENGINE].policy_rules(result.policy_versions)
    state = LaunchState(
        encode_orders(orders), result.allowed_changes, rules, result.policy_versions
    )
    return json_response(LaunchResponse(state), headers={INTERVAL_HEADER: str(result.interval_ms)})

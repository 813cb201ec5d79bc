from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web
from msgspec.structs import replace

from emulator import wire as ew
from emulator.documents import TAXI_PART_SERVICES, taxi_part_answer, totw_answer
from emulator.faults import PART_TARGET_PREFIX, TARGETS, Fault, known_target
from emulator.keys import DRIVER, FAULTS, FEATURES, STATS, TAG_WRITER, WORLD
from emulator.request_fields import served, service_of, user_id_of
from emulator.source_lists import listing
from emulator.work import answer_work
from emulator.world import (
    DataChange,
    InvalidChange,
    Order,
    UnknownOrder,
)
from shared import wire
from shared.errors import BadRequest, NotFound
from shared.upstream_wire import RouteRequest, SourceRequest
from shared.web import json_response, read_json

_order_request = msgspec.json.Decoder(ew.OrderRequest)
_route_request = msgspec.json.Decoder(RouteRequest)
_source_request = msgspec.json.Decoder(SourceRequest)
_create = msgspec.json.Decoder(ew.CreateOrder)
_change = msgspec.json.Decoder(ew.ChangeFields)
_fault = msgspec.json.Decoder(ew.FaultRequest)
_driver = msgspec.json.Decoder(ew.DriverRequest)
_driver_distance = msgspec.json.Decoder(ew.DriverDistance)
_any = msgspec.json.Decoder(dict[str, Any])


async def _upstream_call(request: web.Request, target: str) -> bytes:
    """Count the call and record what the caller sent, then act out the target's fault."""
    body = await request.read()
    try:
        recorded = _any.decode(body) if body else None
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        recorded = None  # recorded as "not JSON"; the handler answers the bad body itself
    request.app[STATS].record_call(target, request.headers, recorded)
    await request.app[FAULTS].apply(target, request)
    return body


async def _respond(
    request: web.Request, target: str, value: Any, *, priced: bool = False
) -> web.Response:
    """The answer, counted; a `priced` one (an order's data: totw, details, a part service,
    the route) also counts the work of building its fields (emulator/work.py)."""
    body = wire.encode(value)
    await request.app[FAULTS].hold(target)
    user = request.headers.get("X-Yandex-UID")
    request.app[STATS].record_bytes(target, len(body), user)
    if priced:
        request.app[STATS].record_work(target, answer_work(value), user)
    return web.Response(body=body, content_type="application/json")


def _find(request: web.Request, service: str, orderid: str, user_id: str) -> Order:
    try:
        return request.app[WORLD].get(service, orderid, user_id)
    except UnknownOrder as exc:
        raise NotFound(str(exc), code="order_not_found") from exc


# --- upstreams ---------------------------------------------------------------------------------


# the list tag a source names for data whose own tag it does not know (the user had no list
# yet, or the bump after that version has not landed or failed): no list has it, so the BFF
# takes the answer for what it is, lagging, and keeps it for no later poll. A source with
# list tags names one in every answer (docs/protocol.md: List tags)
UNKNOWN_LIST_TAG = "unknown-list-version"


async def order_source(request: web.Request) -> web.Response:
    service = service_of(request)
    target = f"source:{service}"
    # the client's known orders with their content tags: recorded, and checked
    asked = wire.decode(_source_request, await _upstream_call(request, target))
    user_id = user_id_of(request)
    lag_s = request.app[FAULTS].lag_s(target)
    if lag_s is None:
        # the primary: its data is at least as new as any list tag readable before the call
        # (data first, tag second), so it serves the tag it was given; asked with none, it
        # does not know which tag its data stands for
        answer = listing(request.app[WORLD], service, user_id)
        served_tag = asked.at_least or UNKNOWN_LIST_TAG
        return await _respond(request, target, replace(answer, list_tag=served_tag))
    # a read replica behind the primary: an older list, under that list's own tag
    served = request.app[FEATURES].lists.as_of(service, user_id, lag_s)
    replica_tag = served.tag or UNKNOWN_LIST_TAG
    return await _respond(request, target, replace(served.answer, list_tag=replica_tag))


def _document(request: web.Request, target: str, order: Order, asked: ew.OrderRequest) -> Any:
    """The order's document as the target serves it: the newest; or, lagging, the one before
    the last change, unless the call asks for a version newer than that one (the design's
    tag passed to the upstream: data no older than the version asked for)."""
    previous = order.previous_doc
    if (
        request.app[FAULTS].lagging(target)
        and previous is not None
        and asked.asked_version() <= previous.get("version", 0)
    ):
        return {"orderid": order.orderid, **previous}
    return {"orderid": order.orderid, **order.doc}


async def taxiontheway(request: web.Request) -> web.Response:
    body = wire.decode(_order_request, await _upstream_call(request, "totw"))
    order = _find(request, "taxi", body.orderid, user_id_of(request))
    document = totw_answer(_document(request, "totw", order, body))
    return await _respond(request, "totw", document, priced=True)


async def order_details(request: web.Request) -> web.Response:
    return await _order_details(request, service_of(request))


async def _order_details(request: web.Request, service: str) -> web.Response:
    if service == "taxi":
        raise NotFound("taxi has no details endpoint; use /3.0/taxiontheway")
    if not served(request, service):
        raise NotFound(f"no service {service!r}")
    target = f"{service}_details"
    body = wire.decode(_order_request, await _upstream_call(request, target))
    order = _find(request, service, body.orderid, user_id_of(request))
    return await _respond(request, target, _document(request, target, order, body), priced=True)


async def generic_part(request: web.Request) -> web.Response:
    """Any part upstream by name (`/parts/<name>`). A part type with an endpoint of its own
    here (OWN_ENDPOINTS) is served by it, the same answer and fault target; one of the taxi
    part services (documents.TAXI_PART_SERVICES) answers its own fields of a taxi order; any
    other name (a part's own `upstream` in the policy) gets the order's whole document, of
    whichever service the user's order is (the BFF cuts the part's fields). Fault target
    `part:<name>`. So a BFF pointed at the emulator (EMULATOR_URL) finds every part upstream
    at `/parts/<name>`, and needs no map of the emulator's paths."""
    part_type = request.match_info["part_type"]
    own = OWN_ENDPOINTS.get(part_type)
    if own is not None:
        return await own(request)
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", part_type):
        raise NotFound(f"no part type {part_type!r}")
    target = PART_TARGET_PREFIX + part_type
    body = wire.decode(_order_request, await _upstream_call(request, target))
    order = request.app[WORLD].find(body.orderid, user_id_of(request))
    taxi_service = part_type in TAXI_PART_SERVICES
    if order is None or (taxi_service and order.service != "taxi"):
        raise NotFound(f"no order {body.orderid!r}", code="order_not_found")
    document = _document(request, target, order, body)
    if taxi_service:
        document = taxi_part_answer(part_type, document)
    return await _respond(request, target, document, priced=True)


async def taxiroute(request: web.Request) -> web.Response:
    body = wire.decode(_route_request, await _upstream_call(request, "taxiroute"))
    if body.orderid is None:
        raise BadRequest("orderid is required", code="invalid_request")
    order = _find(request, "taxi", body.orderid, user_id_of(request))
    return await _respond(request, "taxiroute", request.app[WORLD].route(order), priced=True)


# the part types with an endpoint of their own, laid out as their real upstreams are
# (/3.0/taxiontheway, /<service>/v1/orders/details, /taxiroute/v1/route)
OWN_ENDPOINTS: dict[str, Callable[[web.Request], Awaitable[web.Response]]] = {
    "totw": taxiontheway,
    "eats_full": lambda request: _order_details(request, "eats"),
    "grocery_full": lambda request: _order_details(request, "grocery"),
    "taxiroute": taxiroute,
}


# --- control API -------------------------------------------------------------------------------


async def create_order(request: web.Request) -> web.Response:
    body = await read_json(request, _create)
    if not served(request, body.service):
        raise BadRequest(f"unknown service {body.service!r}", code="unknown_service")
    try:
        order = await request.app[FEATURES].create_order(body.user_id, body.service, body.status)
    except InvalidChange as exc:
        raise BadRequest(str(exc), code="invalid_change") from exc
    return json_response(
        ew.CreatedOrder(order.orderid, order.service, order.status, order.version, order.created_at)
    )


async def _mutate(request: web.Request, mutation: Callable[[str, str], DataChange]) -> web.Response:
    """Change an order's data, then set its tags (data first, tag second). With an
    X-Yandex-UID (a gateway acting for one user, as the demo server does), only that user's
    order: another's is as unknown as a missing one."""
    service, orderid = service_of(request), request.match_info["orderid"]
    try:
        if "X-Yandex-UID" in request.headers:
            request.app[WORLD].get(service, orderid, user_id_of(request))
        change = mutation(service, orderid)
    except UnknownOrder as exc:
        raise NotFound(str(exc), code="order_not_found") from exc
    except InvalidChange as exc:
        raise BadRequest(str(exc), code="invalid_change") from exc
    order = request.app[WORLD].get(service, orderid)
    tags = await request.app[FEATURES].publish(change)
    return json_response(
        ew.Changed(orderid, service, order.status, change.version, sorted(change.fields), tags)
    )


async def advance_order(request: web.Request) -> web.Response:
    return await _mutate(request, request.app[WORLD].advance)


async def place_driver(request: web.Request) -> web.Response:
    """A taxi order's driver put at a distance from its destination: the route says so."""
    body = await read_json(request, _driver_distance)
    try:
        order = request.app[WORLD].get("taxi", request.match_info["orderid"])
    except UnknownOrder as exc:
        raise NotFound(str(exc), code="order_not_found") from exc
    return json_response(request.app[WORLD].place_driver(order, body.distance_left_m))


async def change_order(request: web.Request) -> web.Response:
    body = await read_json(request, _change)
    world = request.app[WORLD]
    return await _mutate(
        request, lambda service, orderid: world.change(service, orderid, body.fields)
    )


async def set_fault(request: web.Request) -> web.Response:
    body = await read_json(request, _fault)
    if not known_target(body.target):
        raise BadRequest(
            f"unknown target {body.target!r}; one of {sorted(TARGETS)}, part:<upstream> "
            "or source:<service>"
        )
    request.app[FAULTS].set(body.target, Fault(body.mode, body.delay_ms))
    return json_response({"faults": request.app[FAULTS].snapshot()})


async def get_stats(request: web.Request) -> web.Response:
    """Everything served since start; with `user_id`, only what that user's requests got."""
    if "user_id" in request.query:
        user = request.query["user_id"]
        if not wire.USER_ID.fullmatch(user):
            raise BadRequest("user_id must be 1 to 128 printable ASCII characters, no spaces")
        return json_response(request.app[STATS].user_snapshot(user))
    snapshot = request.app[STATS].snapshot()
    snapshot["active_orders"] = len(request.app[WORLD].all_active())
    writes = request.app[TAG_WRITER].snapshot()
    # attempts that failed (each kept for retry, or given up): `tag_writes` says which
    snapshot["tag_write_failures"] = writes["failures"]
    snapshot["tag_writes"] = writes
    return json_response(snapshot)


async def set_driver(request: web.Request) -> web.Response:
    body = await read_json(request, _driver)
    request.app[DRIVER].enabled = body.enabled
    return json_response({"enabled": body.enabled})


async def get_changes(request: web.Request) -> web.Response:
    """Data changes after `since` (a sequence number), oldest first: for freshness figures."""
    try:
        since = int(request.query.get("since", "0"))
        if since < 0:
            raise ValueError(since)
    except ValueError as exc:
        raise BadRequest("since must be an integer ≥ 0") from exc
    changes = [
        {
            "seq": c.seq,
            "service": c.service,
            "orderid": c.orderid,
            "version": c.version,
            "fields": sorted(c.fields),
            "at": c.at,
            "user_id": c.user_id,
            "status": c.status,
            "created": c.created,
        }
        for c in request.app[WORLD].changes
        if c.seq > since
    ]
    return json_response({"changes": changes})

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web
from msgspec.structs import replace

from emulator import wire as ew
from emulator.documents import LIFECYCLES, TAXI_PART_SERVICES, taxi_part_answer, totw_answer
from emulator.faults import PART_TARGET_PREFIX, TARGETS, Fault, known_target
from emulator.keys import DRIVER, FAULTS, FEATURES, STATS, TAG_WRITER, WORLD
from emulator.source_lists import listing
from emulator.work import answer_work
from emulator.world import (
    DataChange,
    InvalidChange,
    NotAllowed,
    Order,
    UnknownOrder,
    VersionConflict,
)
from shared import wire
from shared.errors import BadRequest, Conflict, NotFound
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
_versioned_change = msgspec.json.Decoder(ew.VersionedChange)
_last_write_wins_change = msgspec.json.Decoder(ew.LastWriteWinsChange)
_feedback = msgspec.json.Decoder(ew.Feedback)
_cancel = msgspec.json.Decoder(ew.Cancel)
_any = msgspec.json.Decoder(dict[str, Any])


def _user_id(request: web.Request) -> str:
    return wire.checked_user_id(request.headers.get("X-Yandex-UID"))


def _served(request: web.Request, service: str) -> bool:
    """The first three services, and any other the policy file names (served generically)."""
    return service in LIFECYCLES or service in request.app[FEATURES].policy.services


def _service(request: web.Request) -> str:
    service = request.match_info["service"]
    if not _served(request, service):
        raise NotFound(f"no service {service!r}")
    return service


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
    service = _service(request)
    target = f"source:{service}"
    # the client's known orders with their content tags: recorded, and checked
    asked = wire.decode(_source_request, await _upstream_call(request, target))
    user_id = _user_id(request)
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
    order = _find(request, "taxi", body.orderid, _user_id(request))
    document = totw_answer(_document(request, "totw", order, body))
    return await _respond(request, "totw", document, priced=True)


async def order_details(request: web.Request) -> web.Response:
    return await _order_details(request, _service(request))


async def _order_details(request: web.Request, service: str) -> web.Response:
    if service == "taxi":
        raise NotFound("taxi has no details endpoint; use /3.0/taxiontheway")
    if not _served(request, service):
        raise NotFound(f"no service {service!r}")
    target = f"{service}_details"
    body = wire.decode(_order_request, await _upstream_call(request, target))
    order = _find(request, service, body.orderid, _user_id(request))
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
    order = request.app[WORLD].find(body.orderid, _user_id(request))
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
    order = _find(request, "taxi", body.orderid, _user_id(request))
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
    if not _served(request, body.service):
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
    service, orderid = _service(request), request.match_info["orderid"]
    try:
        if "X-Yandex-UID" in request.headers:
            request.app[WORLD].get(service, orderid, _user_id(request))
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


def _feature(request: web.Request) -> str:
    # each feature has a route of its own (its own body), named by its last path segment
    resource = request.match_info.route.resource
    assert resource is not None
    return resource.canonical.rsplit("/", 1)[-1]


async def versioned_change(request: web.Request) -> web.Response:
    """A versioned feature's user change (destination, comment), called by clients."""
    body = await read_json(request, _versioned_change)
    return await _user_change(request, body.value, known_version=body.version)


async def last_write_wins_change(request: web.Request) -> web.Response:
    """A last-write-wins feature's user change (tips), called by clients."""
    body = await read_json(request, _last_write_wins_change)
    return await _user_change(
        request,
        body.value,
        idempotency_key=body.idempotency_key,
        requested_at_ms=body.requested_at_ms,
    )


async def feedback(request: web.Request) -> web.Response:
    """The user rates a finished trip (it stays listed until rated)."""
    body = await read_json(request, _feedback)
    service, orderid = _service(request), request.match_info["orderid"]
    features = request.app[FEATURES]
    try:
        version = await features.rate(service, orderid, _user_id(request), body.rating)
    except UnknownOrder as exc:
        raise NotFound(str(exc), code="order_not_found") from exc
    except InvalidChange as exc:
        raise BadRequest(str(exc), code="invalid_change") from exc
    return json_response(ew.UserChanged(orderid, "feedback", version))


async def cancel(request: web.Request) -> web.Response:
    """The user cancels the order, where its `cancel` capability allows (409 otherwise)."""
    await read_json(request, _cancel)
    service, orderid = _service(request), request.match_info["orderid"]
    try:
        version = await request.app[FEATURES].cancel(service, orderid, _user_id(request))
    except UnknownOrder as exc:
        raise NotFound(str(exc), code="order_not_found") from exc
    except NotAllowed as exc:
        raise Conflict(str(exc), code="not_allowed", reason=exc.reason) from exc
    return json_response(ew.UserChanged(orderid, "cancel", version))


async def _user_change(
    request: web.Request,
    value: Any,
    *,
    known_version: int | None = None,
    idempotency_key: str | None = None,
    requested_at_ms: int = 0,
) -> web.Response:
    service, orderid = _service(request), request.match_info["orderid"]
    feature = _feature(request)
    features = request.app[FEATURES]
    try:
        version = await features.user_change(
            service,
            orderid,
            _user_id(request),
            feature,
            value,
            known_version=known_version,
            idempotency_key=idempotency_key,
            requested_at_ms=requested_at_ms,
        )
    except UnknownOrder as exc:
        raise NotFound(str(exc), code="order_not_found") from exc
    except VersionConflict as exc:
        raise Conflict(
            str(exc), code="version_conflict", current_version=exc.current_version
        ) from exc
    except NotAllowed as exc:
        raise Conflict(str(exc), code="not_allowed", reason=exc.reason) from exc
    except InvalidChange as exc:
        raise BadRequest(str(exc), code="invalid_change") from exc
    return json_response(ew.UserChanged(orderid, feature, version))


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

"""The emulator's feature services as apps call them (docs/protocol.md: Feature data and
user changes): a versioned change, a last-write-wins change, a trip's rating, a cancel; each
data first, then its tags."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from emulator import wire as ew
from emulator.keys import FEATURES
from emulator.request_fields import service_of, user_id_of
from emulator.world import InvalidChange, NotAllowed, UnknownOrder, VersionConflict
from shared.errors import BadRequest, Conflict, NotFound
from shared.web import json_response, read_json

_versioned_change = msgspec.json.Decoder(ew.VersionedChange)
_last_write_wins_change = msgspec.json.Decoder(ew.LastWriteWinsChange)
_feedback = msgspec.json.Decoder(ew.Feedback)
_cancel = msgspec.json.Decoder(ew.Cancel)


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
    service, orderid = service_of(request), request.match_info["orderid"]
    features = request.app[FEATURES]
    try:
        version = await features.rate(service, orderid, user_id_of(request), body.rating)
    except UnknownOrder as exc:
        raise NotFound(str(exc), code="order_not_found") from exc
    except InvalidChange as exc:
        raise BadRequest(str(exc), code="invalid_change") from exc
    return json_response(ew.UserChanged(orderid, "feedback", version))


async def cancel(request: web.Request) -> web.Response:
    """The user cancels the order, where its `cancel` capability allows (409 otherwise)."""
    await read_json(request, _cancel)
    service, orderid = service_of(request), request.match_info["orderid"]
    try:
        version = await request.app[FEATURES].cancel(service, orderid, user_id_of(request))
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
    service, orderid = service_of(request), request.match_info["orderid"]
    feature = _feature(request)
    features = request.app[FEATURES]
    try:
        version = await features.user_change(
            service,
            orderid,
            user_id_of(request),
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

from __future__ import annotations

import time

import msgspec
from aiohttp import web

from services.order_tags.keys import TAG_STORE
from services.order_tags.storage import KeptEntry
from shared import wire
from shared.web import json_response, read_json

_get = msgspec.json.Decoder(wire.TagsGetRequest)
_set = msgspec.json.Decoder(wire.TagsSetRequest)
_create = msgspec.json.Decoder(wire.TagsCreateRequest)
_bump = msgspec.json.Decoder(wire.TagsBumpRequest)
_delete = msgspec.json.Decoder(wire.TagsDeleteRequest)
_bump_list = msgspec.json.Decoder(wire.ListBumpRequest)
_keep = msgspec.json.Decoder(wire.ListKeepRequest)
_keep_many = msgspec.json.Decoder(wire.ListsKeepRequest)
# a kept answer as stored (it was valid when kept)
_kept = msgspec.json.Decoder(wire.KeptAnswer)


async def get_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _get)
    read = await request.app[TAG_STORE].read(
        body.orders, body.lists, body.force, body.force_per_minute
    )
    # per order as well, for a BFF that reads it there (a fleet mid-deploy)
    honoured_orders = {forced.key for forced in read.honoured}
    return json_response(
        wire.TagsGetResponse(
            orders=[
                wire.OrderTags(
                    order.service,
                    order.orderid,
                    stored.parts,
                    stored.created_ms,
                    stored.owner,
                    order in honoured_orders,
                    stored.made_ms,
                )
                for order, stored in zip(body.orders, read.orders, strict=True)
            ],
            forced=[forced in read.honoured for forced in body.force],
            lists=[
                wire.ListEntry(one.service, one.user_id, stored.tag, _kept_answer(stored.kept))
                for one, stored in zip(body.lists, read.lists, strict=True)
            ],
        )
    )


def _kept_answer(stored: str | None) -> wire.KeptAnswer | None:
    """A kept answer as stored; one that does not decode (written by another version) is
    as good as none: the source is asked."""
    if not stored:
        return None
    try:
        return _kept.decode(stored)
    except msgspec.DecodeError:
        return None


async def bump_list(request: web.Request) -> web.Response:
    body = await read_json(request, _bump_list)
    tag = await request.app[TAG_STORE].bump_list(body.service, body.user_id)
    return json_response(wire.ListBumpResponse(body.service, body.user_id, tag))


def _to_keep(body: wire.ListKeepRequest, now_ms: int) -> KeptEntry:
    """An answer as kept; BadRequest for one too large or too deep to keep."""
    answer = wire.encode(body.answer)
    wire.check_kept_answer(body.answer, len(answer))
    kept = wire.KeptAnswer(body.tag, now_ms, msgspec.Raw(answer))
    return KeptEntry(body.service, body.user_id, wire.encode(kept), body.max_age_ms / 1000)


async def keep_answer(request: web.Request) -> web.Response:
    body = await read_json(request, _keep)
    await request.app[TAG_STORE].keep_answers([_to_keep(body, int(time.time() * 1000))])
    return json_response(wire.ListKeepResponse(kept=True))


async def keep_answers(request: web.Request) -> web.Response:
    body = await read_json(request, _keep_many)
    now_ms = int(time.time() * 1000)
    # every answer checked before any is written: a bad one changes nothing
    entries = [_to_keep(answer, now_ms) for answer in body.answers]
    await request.app[TAG_STORE].keep_answers(entries)
    return json_response(wire.ListsKeepResponse(kept=len(entries)))


async def set_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _set)
    stored = await request.app[TAG_STORE].set(
        body.service,
        body.orderid,
        body.tags,
        only_if_absent=body.only_if_absent,
        owner=body.user_id,
    )
    return json_response(wire.TagsWriteResponse(body.service, body.orderid, stored))


async def create_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _create)
    stored = await request.app[TAG_STORE].create_many(
        [
            (wire.OrderKey(order.service, order.orderid), order.parts, order.user_id, order.version)
            for order in body.orders
        ]
    )
    return json_response(
        wire.TagsGetResponse(
            orders=[
                wire.OrderTags(order.service, order.orderid, tags)
                for order, tags in zip(body.orders, stored, strict=True)
            ]
        )
    )


async def bump_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _bump)
    new_tags = await request.app[TAG_STORE].bump(body.service, body.orderid, body.parts)
    return json_response(wire.TagsWriteResponse(body.service, body.orderid, new_tags))


async def delete_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _delete)
    deleted = await request.app[TAG_STORE].delete(body.service, body.orderid)
    return json_response(wire.TagsDeleteResponse(deleted=deleted))

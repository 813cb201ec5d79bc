from __future__ import annotations

import msgspec
from aiohttp import web

from services.order_tags.keys import TAG_STORE
from shared import wire
from shared.web import json_response, read_json

_get = msgspec.json.Decoder(wire.TagsGetRequest)
_set = msgspec.json.Decoder(wire.TagsSetRequest)
_create = msgspec.json.Decoder(wire.TagsCreateRequest)
_bump = msgspec.json.Decoder(wire.TagsBumpRequest)
_delete = msgspec.json.Decoder(wire.TagsDeleteRequest)


async def get_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _get)
    stored = await request.app[TAG_STORE].get_many(body.orders)
    return json_response(
        wire.TagsGetResponse(
            orders=[
                wire.OrderTags(order.service, order.orderid, tags)
                for order, tags in zip(body.orders, stored, strict=True)
            ]
        )
    )


async def set_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _set)
    stored = await request.app[TAG_STORE].set(
        body.service, body.orderid, body.tags, only_if_absent=body.only_if_absent
    )
    return json_response(wire.TagsWriteResponse(body.service, body.orderid, stored))


async def create_tags(request: web.Request) -> web.Response:
    body = await read_json(request, _create)
    stored = await request.app[TAG_STORE].create_many(
        [(wire.OrderKey(order.service, order.orderid), order.parts) for order in body.orders]
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

"""Launch's extended order info (docs/protocol.md: Extended order info): the required parts each
order needs, fetched by the part machinery exactly as a part endpoint would (content tag read
before the data, the same deadlines and per-order errors), put inline in the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from services.bff.part_request import RequestedOrder
from services.bff.part_service import PartService
from shared.answer import AnsweredOrder
from shared.policy import PollingPolicy
from shared.protocol.extended_info import inline_parts, parts_to_inline


async def with_required_parts(
    orders: Sequence[AnsweredOrder],
    parts: PartService,
    policy: PollingPolicy,
    headers: dict[str, str],
) -> list[AnsweredOrder]:
    endpoints = {
        (endpoint.service, endpoint.rule.part_name): endpoint
        for endpoint in policy.endpoints
        if not endpoint.deprecated
    }
    required = {
        service: [rule.part_name for rule in served.rules if rule.tag_defined and rule.required]
        for service, served in policy.services.items()
    }
    wanted = parts_to_inline(orders, required)
    # every part of every order at once: the slowest one bounds the launch, not their sum
    results = await asyncio.gather(
        *(
            parts.fetch_parts(
                endpoints[key], [RequestedOrder(orderid, None) for orderid in orderids], {}, headers
            )
            for key, orderids in wanted.items()
        )
    )
    fetched: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for (service, part), answers in zip(wanted, results, strict=True):
        for answer in answers:
            fetched.setdefault((service, answer["orderid"]), {})[part] = answer
    return [
        inline_parts(order, fetched.get((order.service, order.orderid), {})) for order in orders
    ]

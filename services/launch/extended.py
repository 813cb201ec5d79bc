"""Launch's extended order info (docs/protocol.md: Extended order info): the required parts each
order needs, fetched by the part machinery exactly as a part endpoint would (content tag read
before the data, the same deadlines and per-order errors), put inline in the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from services.bff.part_request import RequestedOrder
from services.bff.part_service import PartService
from services.bff.poll import Poll
from shared.answer import AnsweredOrder
from shared.policy import PollingPolicy
from shared.protocol.extended_info import inline_parts, part_parameters, parts_to_inline
from shared.wire import OrderKey, PartData


async def with_required_parts(
    orders: Sequence[AnsweredOrder],
    parts: PartService,
    policy: PollingPolicy,
    poll: Poll,
    *,
    versions: Mapping[str, str],
    sent_parameters: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[AnsweredOrder]:
    """Each order with the required parts it needs inline, of the policy version handed out
    for its service (`versions`), fetched with the fields the app sent for their part type
    (or the documented defaults), and with the tags of them the poll's known orders hold, so
    their upstreams get the content tags the app holds."""
    endpoints = {
        (endpoint.service, endpoint.rule.part_name): endpoint
        for endpoint in policy.endpoints
        if versions.get(endpoint.service) == endpoint.policy_version
    }
    required = {
        service: [
            rule.part_name
            for rule in policy.services[service].versions[version]
            if rule.tag_defined and rule.required
        ]
        for service, version in versions.items()
    }
    wanted = parts_to_inline(orders, required)
    client_tags = {known_order.key: known_order.order.tags for known_order in poll.known_orders}

    def requested(service: str, part: str, orderid: str) -> RequestedOrder:
        return RequestedOrder(orderid, client_tags.get(OrderKey(service, orderid), {}).get(part))

    # every part of every order at once: the slowest one bounds the launch, not their sum
    results = await asyncio.gather(
        *(
            parts.fetch_parts(
                endpoints[(service, part)],
                [requested(service, part, orderid) for orderid in orderids],
                part_parameters(endpoints[(service, part)].rule.part_type, sent_parameters or {}),
                poll.caller,
            )
            for (service, part), orderids in wanted.items()
        )
    )
    fetched: dict[tuple[str, str], dict[str, PartData]] = {}
    for (service, part), answers in zip(wanted, results, strict=True):
        for answer in answers:
            fetched.setdefault((service, answer["orderid"]), {})[part] = answer
    return [
        inline_parts(order, fetched.get((order.service, order.orderid), {})) for order in orders
    ]

"""The reference client's part answers (docs/protocol.md: Writing a client): a part's fields
are replaced exactly (one absent is deleted), but a part answered `unchanged` keeps them."""

from __future__ import annotations

import random

from client.model import ClientOptions, Order, Part, Rule
from client.parts import PartOutcome, apply_part

RULE = Rule("taxi", "fast_info", "/p/fast_info", ("status", "eta"), "tag_defined", "totw", 0)


def held_order() -> Order:
    order = Order("o1", "taxi", "driving")
    order.parts["fast_info"] = Part(tag="t1", fields={"status": "driving", "eta": 5}, arrived=True)
    return order


def apply(order: Order, result: dict) -> PartOutcome:
    return apply_part(order, RULE, result, ClientOptions(), random.Random(1))


def test_a_part_answered_unchanged_keeps_its_fields_under_the_new_tag():
    order = held_order()
    assert apply(order, {"orderid": "o1", "tag": "t2", "unchanged": True}) is PartOutcome.ARRIVED
    assert order.parts["fast_info"].fields == {"status": "driving", "eta": 5}
    assert order.parts["fast_info"].tag == "t2"


def test_a_part_answered_with_data_is_replaced_exactly_an_absent_field_deleted():
    order = held_order()
    apply(order, {"orderid": "o1", "tag": "t2", "status": "transporting"})
    assert order.parts["fast_info"].fields == {"status": "transporting"}

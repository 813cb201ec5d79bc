"""Extended order info (docs/protocol.md: Extended order info)."""

from __future__ import annotations

from shared.answer import ActualOrder, AnsweredOrder, StaleOrder
from shared.protocol.extended_info import inline_parts, part_parameters, parts_to_inline

REQUIRED = {"taxi": ["fast_info"], "eats": ["full_info"]}


def order(orderid: str, service: str, need: list[str], status: str = "actual") -> AnsweredOrder:
    if status == "stale":
        return StaleOrder(orderid, service, "cooking", {}, need, {})
    return ActualOrder(orderid, service, "driving", {}, need, {})


def test_each_actual_order_gets_the_required_parts_it_needs():
    orders = [
        order("t1", "taxi", ["fast_info", "chat"]),
        order("t2", "taxi", ["chat"]),  # holds a valid fast_info tag: not fetched again
        order("e1", "eats", ["full_info"]),
        order("e2", "eats", [], status="stale"),  # the source is down: nothing to fetch
    ]
    assert parts_to_inline(orders, REQUIRED) == {
        ("taxi", "fast_info"): ["t1"],
        ("eats", "full_info"): ["e1"],
    }


def test_a_fetched_part_is_inline_with_its_tag_and_not_in_need_request():
    inlined = inline_parts(
        order("t1", "taxi", ["fast_info", "chat"]),
        {"fast_info": {"orderid": "t1", "tag": "tg", "status": "driving"}},
    )
    assert isinstance(inlined, ActualOrder)
    assert inlined.parts == {"fast_info": {"tag": "tg", "status": "driving"}}
    assert inlined.need_request == ["chat"]


def test_a_part_that_failed_is_left_out_and_stays_needed():
    original = order("t1", "taxi", ["fast_info", "chat"])
    inlined = inline_parts(
        original, {"fast_info": {"orderid": "t1", "error": {"update_status": "stale"}}}
    )
    assert isinstance(inlined, ActualOrder)
    assert inlined.parts is None and inlined.need_request == ["fast_info", "chat"]


# "inline parts are fetched with the fields the app's part requests of their part_type carry;
# a part type the launch request leaves out gets the documented defaults"


def test_inline_parts_are_fetched_with_the_fields_the_app_sent_for_their_part_type():
    sent = {"totw": {"position": [37.6, 55.7], "format_currency": False}}
    assert part_parameters("totw", sent) == {"position": [37.6, 55.7], "format_currency": False}


def test_a_part_type_the_app_left_out_gets_the_documented_defaults():
    assert part_parameters("totw", {}) == {"format_currency": True}
    assert part_parameters("eats_full", {"totw": {"position": [1, 2]}}) == {}


def test_the_part_requests_own_names_are_never_taken_from_the_app():
    sent = {"totw": {"orders": [{"orderid": "x"}], "orderid": "x", "tags": {}, "supported": []}}
    assert part_parameters("totw", sent) == {"supported": []}

"""The answered order on the wire (docs/protocol.md: Polling orders): one object per order,
tagged by `update_status`, its brief (actual) or echo (stale) fields among its own fields."""

from __future__ import annotations

import json

from client.model import STATE_KEYS
from shared.answer import (
    ANSWER_FIELDS,
    ActualOrder,
    StaleOrder,
    encode_order,
    encode_orders,
    without_answer_fields,
)
from shared.protocol.allowed_changes import ChangeCapability


def decoded(order: ActualOrder | StaleOrder) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(bytes(encode_order(order)))
    return loaded


def test_an_actual_order_carries_its_brief_fields_among_its_own():
    order = ActualOrder(
        "o1",
        "taxi",
        "driving",
        {"fast_info": "t"},
        ["chat"],
        {"cancel": ChangeCapability(True)},
        brief={"short_address": "Avenue 1", "eta_min": 4},
    )
    assert decoded(order) == {
        "update_status": "actual",
        "orderid": "o1",
        "service": "taxi",
        "status": "driving",
        "tags": {"fast_info": "t"},
        "need_request": ["chat"],
        "change_capabilities": {"cancel": {"allowed": True}},
        "short_address": "Avenue 1",
        "eta_min": 4,
    }


def test_a_stale_order_echoes_the_clients_fields_and_needs_nothing():
    order = StaleOrder(
        "e7",
        "eats",
        "cooking",
        {"full_info": "t"},
        [],
        {"cancel": ChangeCapability(False, "service_unavailable")},
        echo={"some_field": "some_value"},
    )
    assert decoded(order) == {
        "update_status": "stale",
        "orderid": "e7",
        "service": "eats",
        "status": "cooking",
        "tags": {"full_info": "t"},
        "need_request": [],
        "change_capabilities": {"cancel": {"allowed": False, "reason": "service_unavailable"}},
        "some_field": "some_value",
    }


def test_without_brief_fields_the_object_is_the_structs_own():
    order = ActualOrder("o1", "taxi", "driving", {}, [], {})
    assert decoded(order) == {
        "update_status": "actual",
        "orderid": "o1",
        "service": "taxi",
        "status": "driving",
        "tags": {},
        "need_request": [],
        "change_capabilities": {},
    }
    encoded = encode_orders([order, order])
    assert [json.loads(bytes(raw))["orderid"] for raw in encoded] == ["o1", "o1"]


def test_a_brief_or_echo_field_never_overwrites_the_answers_own():
    sent = {"status": "finished", "update_status": "actual", "parts": {}, "note": "x"}
    assert without_answer_fields(sent) == {"note": "x"}


def test_the_reference_client_knows_the_same_answer_fields():
    # the client imports nothing of the server: its own list, kept equal here. created_at and
    # version are the answer fields it keeps with the brief fields: it echoes them, so that its
    # order, stale while its service is down, is placed where it will be when the service is
    # back, and no answer takes it back to an older version than the one it shows
    assert ANSWER_FIELDS - {"created_at", "version"} == STATE_KEYS

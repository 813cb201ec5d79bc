"""Which order a route request is for (docs/protocol.md: Part endpoints)."""

from __future__ import annotations

import pytest

from shared.errors import NotFound, ServiceUnavailable
from shared.protocol.route import route_orderid

T1 = "2026-01-01T10:00:00.000Z"
T2 = "2026-01-01T10:05:00.000Z"


def test_the_requested_order_is_routed_whatever_the_user_has():
    assert route_orderid("o2", [(T1, "o1")]) == "o2"
    assert route_orderid("o2", None) == "o2"  # no source call needed


def test_without_orderid_the_route_is_that_of_the_users_one_active_order():
    assert route_orderid(None, [(T1, "o1")]) == "o1"


def test_with_several_active_orders_the_route_is_that_of_the_newest():
    # the old taxiroute body, sent unchanged by an old single-order app: the order it shows
    assert route_orderid(None, [(T2, "o2"), (T1, "o1")]) == "o2"
    assert route_orderid(None, [(T1, "o1"), (T2, "o2")]) == "o2"


def test_with_none_there_is_nothing_to_route():
    with pytest.raises(NotFound):
        route_orderid(None, [])


def test_without_an_answer_of_the_source_the_client_must_name_the_order():
    with pytest.raises(ServiceUnavailable, match="send orderid"):
        route_orderid(None, None)

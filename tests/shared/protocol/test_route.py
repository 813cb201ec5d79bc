"""Which order a route request is for (docs/protocol.md: Part endpoints)."""

from __future__ import annotations

import pytest

from shared.errors import BadRequest, NotFound, ServiceUnavailable
from shared.protocol.route import route_orderid


def test_the_requested_order_is_routed_whatever_the_user_has():
    assert route_orderid("o2", ["o1"]) == "o2"
    assert route_orderid("o2", None) == "o2"  # no source call needed


def test_without_orderid_the_route_is_that_of_the_users_one_active_order():
    assert route_orderid(None, ["o1"]) == "o1"


def test_with_several_active_orders_orderid_is_needed():
    with pytest.raises(BadRequest, match="orderid is needed"):
        route_orderid(None, ["o1", "o2"])


def test_with_none_there_is_nothing_to_route():
    with pytest.raises(NotFound):
        route_orderid(None, [])


def test_without_an_answer_of_the_source_the_client_must_name_the_order():
    with pytest.raises(ServiceUnavailable, match="send orderid"):
        route_orderid(None, None)

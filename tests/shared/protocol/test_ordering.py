"""Canonical order and the stale merge; when a service comes back, nothing moves."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from shared.protocol.ordering import canonical_key, merge_orders
from shared.wire import OrderKey


@dataclass(frozen=True)
class Ord:
    service: str
    orderid: str
    created_at: str

    @property
    def key(self) -> OrderKey:
        return OrderKey(self.service, self.orderid)


def canonical(orders: list[Ord]) -> list[Ord]:
    return sorted(orders, key=lambda o: canonical_key(o.created_at, o.service, o.orderid))


def merge(actual: list[Ord], stale: list[Ord], known: list[Ord]) -> list[Ord]:
    return merge_orders(canonical(actual), stale, [o.key for o in known], lambda o: o.key)


def test_canonical_order_is_created_at_then_service_then_orderid():
    a = Ord("taxi", "b", "2026-01-01T10:00:00.000Z")
    b = Ord("eats", "z", "2026-01-01T10:00:00.000Z")
    c = Ord("taxi", "a", "2026-01-01T10:00:00.000Z")
    d = Ord("eats", "a", "2026-01-01T09:00:00.000Z")
    assert canonical([a, b, c, d]) == [d, b, c, a]


def test_a_stale_order_goes_right_after_its_nearest_placed_predecessor():
    t1, e1, t2 = Ord("taxi", "1", "1"), Ord("eats", "1", "2"), Ord("taxi", "2", "3")
    assert merge([t1, t2], [e1], [t1, e1, t2]) == [t1, e1, t2]


def test_a_stale_order_with_no_placed_predecessor_goes_to_the_front():
    e1, t1 = Ord("eats", "1", "1"), Ord("taxi", "1", "2")
    assert merge([t1], [e1], [e1, t1]) == [e1, t1]


def test_stale_orders_are_taken_in_known_orders_order():
    e1, e2, t1 = Ord("eats", "1", "1"), Ord("eats", "2", "2"), Ord("taxi", "1", "3")
    assert merge([t1], [e1, e2], [e1, e2, t1]) == [e1, e2, t1]


services = st.sampled_from(["taxi", "eats", "grocery"])
orders_strategy = st.lists(
    st.builds(
        Ord,
        services,
        st.text("abc", min_size=1, max_size=3),
        st.text("0123", min_size=1, max_size=2),
    ),
    max_size=8,
    unique_by=lambda o: o.key,
)


@given(orders=orders_strategy, down=services)
def test_when_a_service_comes_back_no_order_that_was_shown_moves(orders: list[Ord], down: str):
    # the client shows the canonical list, then the service goes down: its orders go stale
    shown = canonical(orders)
    while_down = merge(
        [o for o in orders if o.service != down], [o for o in shown if o.service == down], shown
    )
    assert while_down == shown
    # and it comes back: everything is actual again, in canonical order, which is what was shown
    assert canonical(orders) == while_down


@given(orders=orders_strategy, down=services, data=st.data())
def test_orders_of_available_services_keep_canonical_order_among_themselves(
    orders: list[Ord], down: str, data: st.DataObject
):
    known = data.draw(st.permutations(orders))
    merged = merge(
        [o for o in orders if o.service != down], [o for o in known if o.service == down], known
    )
    assert sorted(merged, key=lambda o: o.key) == sorted(orders, key=lambda o: o.key)
    actual = [o for o in merged if o.service != down]
    assert actual == canonical(actual)

"""Canonical order and the stale merge; when a service comes back, nothing moves."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from shared.protocol.ordering import CanonicalKey, canonical_key, created_instant, merge_orders
from shared.wire import OrderKey


@dataclass(frozen=True)
class Ord:
    service: str
    orderid: str
    created_at: str
    # a stale order's client echoed its created_at (every actual order has one)
    echoed: bool = True

    @property
    def key(self) -> OrderKey:
        return OrderKey(self.service, self.orderid)


def placed_by(order: Ord) -> CanonicalKey | None:
    if not order.echoed:
        return None
    return canonical_key(order.created_at, order.service, order.orderid)


def unechoed(order: Ord) -> Ord:
    return Ord(order.service, order.orderid, order.created_at, echoed=False)


def canonical(orders: list[Ord]) -> list[Ord]:
    return sorted(orders, key=lambda o: canonical_key(o.created_at, o.service, o.orderid))


def merge(actual: list[Ord], stale: list[Ord], known: list[Ord]) -> list[Ord]:
    return merge_orders(
        canonical(actual), stale, [o.key for o in known], lambda o: o.key, placed_by
    )


def test_canonical_order_is_created_at_then_service_then_orderid():
    a = Ord("taxi", "b", "2026-01-01T10:00:00.000Z")
    b = Ord("eats", "z", "2026-01-01T10:00:00.000Z")
    c = Ord("taxi", "a", "2026-01-01T10:00:00.000Z")
    d = Ord("eats", "a", "2026-01-01T09:00:00.000Z")
    assert canonical([a, b, c, d]) == [d, b, c, a]


def test_a_stale_order_without_created_at_goes_right_after_its_nearest_placed_predecessor():
    t1, e1, t2 = Ord("taxi", "1", "1"), unechoed(Ord("eats", "1", "2")), Ord("taxi", "2", "3")
    assert merge([t1, t2], [e1], [t1, e1, t2]) == [t1, e1, t2]


def test_a_stale_order_without_created_at_and_no_placed_predecessor_goes_to_the_front():
    e1, t1 = unechoed(Ord("eats", "1", "1")), Ord("taxi", "1", "2")
    assert merge([t1], [e1], [e1, t1]) == [e1, t1]


def test_stale_orders_without_created_at_are_taken_in_known_orders_order():
    e1, e2 = unechoed(Ord("eats", "1", "1")), unechoed(Ord("eats", "2", "2"))
    t1 = Ord("taxi", "1", "3")
    assert merge([t1], [e1, e2], [e1, e2, t1]) == [e1, e2, t1]


def test_a_stale_order_with_its_created_at_goes_where_it_will_be_when_its_service_is_back():
    # the client listed only the stale order (a launch after a restart, its service down):
    # the neighbour rule has nothing to go by, its created_at has
    taxi = Ord("taxi", "t1", "2026-01-01T10:00:00.000Z")
    eats = Ord("eats", "e1", "2026-01-01T11:00:00.000Z")
    assert merge([taxi], [eats], [eats]) == [taxi, eats]
    # and back: the same order, nothing moves
    assert canonical([taxi, eats]) == [taxi, eats]


def test_created_at_orders_by_the_instant_whatever_its_writing():
    # the same instant written two ways, and an earlier one with another offset
    a = canonical_key("2026-01-01T10:00:00Z", "taxi", "a")
    b = canonical_key("2026-01-01T10:00:00.000+00:00", "taxi", "a")
    c = canonical_key("2026-01-01T12:30:00+03:00", "eats", "z")
    assert a == b and c < a


def test_an_echoed_created_at_that_names_no_instant_places_nothing():
    assert created_instant("yesterday") is None
    assert created_instant("2026-01-01T10:00:00") is None  # no offset: no instant
    assert created_instant("x" * 10_000) is None
    assert created_instant("2026-01-01T10:00:00.000Z") is not None


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


instants = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2026, 1, 2), timezones=st.just(UTC)
).map(lambda moment: moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
echoed_orders = st.lists(
    st.builds(Ord, services, st.text("abc", min_size=1, max_size=3), instants),
    max_size=8,
    unique_by=lambda o: o.key,
)


@given(orders=echoed_orders, down=services, data=st.data())
def test_with_created_at_echoed_nothing_moves_whatever_the_client_listed(
    orders: list[Ord], down: str, data: st.DataObject
):
    stale = [o for o in orders if o.service == down]
    actual = [o for o in orders if o.service != down]
    # the client lists its stale orders and any of the others, in any order
    others = data.draw(st.lists(st.sampled_from(actual), unique=True)) if actual else []
    listed = data.draw(st.permutations([*stale, *others]))
    known_stale = [o for o in listed if o.service == down]
    merged = merge(actual, known_stale, listed)
    # exactly where they will all be when the service is back
    assert merged == canonical(orders)

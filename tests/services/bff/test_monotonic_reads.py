"""The per-process bound on the source calls echoed versions may cause (docs/protocol.md:
Orders and their order): one per `min_ttl` per (user, service), whatever a client echoes."""

from __future__ import annotations

from services.bff.known_orders import ParsedKnownOrder
from services.bff.monotonic_reads import VersionChecks, behind, echoed_versions
from services.bff.wire import KnownOrder
from shared.protocol.allowed_changes import SourceAllowance
from shared.upstream_wire import SourceOrder, SourceResponse
from shared.wire import OrderKey

CREATED = "2026-01-01T10:00:00.000Z"


def test_a_user_s_service_is_asked_at_most_once_per_min_ttl():
    checks = VersionChecks(min_ttl_ms=2_000)
    assert checks.allow("u1", ["taxi", "eats"], now_ms=1_000) == {"taxi", "eats"}
    for now_ms in range(1_000, 3_000, 100):
        assert checks.allow("u1", ["taxi"], now_ms=now_ms) == set()
    assert checks.allow("u1", ["taxi"], now_ms=3_000) == {"taxi"}


def test_one_user_s_echoes_do_not_hold_back_another_s():
    checks = VersionChecks(min_ttl_ms=2_000)
    assert checks.allow("u1", ["taxi"], now_ms=1_000) == {"taxi"}
    assert checks.allow("u2", ["taxi"], now_ms=1_001) == {"taxi"}


def test_the_memo_forgets_what_no_longer_bounds_anything_and_is_bounded_in_entries():
    checks = VersionChecks(min_ttl_ms=2_000, max_entries=3)
    for user in range(10):
        checks.allow(f"u{user}", ["taxi"], now_ms=1_000)
    assert len(checks) == 3
    checks.allow("late", ["taxi"], now_ms=5_000)
    assert len(checks) == 1


def test_the_echoed_versions_are_the_well_formed_ones():
    known = [
        ParsedKnownOrder(KnownOrder("o1", "taxi"), {"version": 7}),
        ParsedKnownOrder(KnownOrder("o2", "taxi"), {"version": "7"}),
        ParsedKnownOrder(KnownOrder("o3", "taxi"), {}),
    ]
    assert echoed_versions(known) == {OrderKey("taxi", "o1"): 7}


def test_an_answer_listing_an_order_older_than_its_echo_is_behind():
    answer = SourceResponse(
        [SourceOrder("o1", "driving", CREATED, version=6), SourceOrder("o2", "driving", CREATED)],
        SourceAllowance(can_make_more_orders=True),
    )
    echoed = {OrderKey("taxi", "o1"): 7, OrderKey("taxi", "o2"): 3}
    assert behind({"taxi": answer, "eats": None}, echoed) == {OrderKey("taxi", "o1")}
    assert behind({"taxi": answer}, {OrderKey("taxi", "o1"): 6}) == set()

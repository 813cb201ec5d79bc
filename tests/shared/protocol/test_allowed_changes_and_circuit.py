from __future__ import annotations

from shared.protocol.allowed_changes import (
    AllowedChange,
    ChangeCapability,
    SourceAllowance,
    allowed_changes,
    unavailable_capabilities,
)
from shared.protocol.circuit import CircuitBreaker


def test_allowed_changes_has_one_entry_per_queried_service():
    result = allowed_changes(
        ["taxi", "eats", "grocery"],
        {"taxi": SourceAllowance(True), "grocery": SourceAllowance(False, "active_orders_limit")},
    )
    assert result == [
        AllowedChange("taxi", True),
        AllowedChange("eats", False, "service_unavailable"),
        AllowedChange("grocery", False, "active_orders_limit"),
    ]


def test_the_circuit_opens_after_failures_in_a_row_and_probes_after_the_pause():
    circuit = CircuitBreaker(failures_to_open=3, open_s=2.0)
    for now in (0.0, 0.1, 0.2):
        assert circuit.allow(now)
        circuit.failure(now)
    assert not circuit.allow(1.0)
    assert circuit.allow(2.3)  # the probe
    assert not circuit.allow(2.3)  # only one
    circuit.failure(2.4)
    assert not circuit.allow(3.0)
    assert circuit.allow(4.5)
    circuit.success()
    assert circuit.allow(4.6) and not circuit.is_open


def test_a_success_resets_the_failure_count():
    circuit = CircuitBreaker(failures_to_open=2, open_s=1.0)
    circuit.failure(0.0)
    circuit.success()
    circuit.failure(0.1)
    assert circuit.allow(0.2)


def test_an_abandoned_probe_lets_the_next_call_probe():
    circuit = CircuitBreaker(failures_to_open=1, open_s=1.0)
    circuit.failure(0.0)
    assert circuit.allow(1.5)  # the probe
    circuit.abandon()  # cancelled: no verdict
    assert circuit.allow(1.6)  # another probe may go
    assert circuit.is_open


def test_a_stale_order_may_change_nothing_each_kind_says_service_unavailable():
    assert unavailable_capabilities(["cancel", "comment"]) == {
        "cancel": ChangeCapability(False, "service_unavailable"),
        "comment": ChangeCapability(False, "service_unavailable"),
    }
    assert unavailable_capabilities([]) == {}  # a service not served defines none

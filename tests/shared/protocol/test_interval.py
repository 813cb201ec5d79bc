"""The polling interval: per-status base, minimum, ×2 degraded, overload, jitter, clamp."""

from __future__ import annotations

import random
from dataclasses import replace

from services.bff.config import ProtocolSettings
from services.bff.resources import interval_rules
from shared.policy import load_policy
from shared.protocol.interval import overload_factor, polling_interval_ms

# the per-status bases of the policy file
NO_JITTER = interval_rules(ProtocolSettings(interval={"jitter": 0.0}), load_policy())


def interval(orders, *, degraded=False, overload=1.0, rules=NO_JITTER, seed=0) -> int:  # type: ignore[no-untyped-def]
    return polling_interval_ms(
        orders, degraded=degraded, overload=overload, rng=random.Random(seed), rules=rules
    )


def test_the_base_is_per_status_and_the_minimum_over_orders_wins():
    assert interval([("taxi", "driving")]) == 3000
    assert interval([("taxi", "transporting"), ("taxi", "searching")]) == 2000
    assert interval([("eats", "cooking")]) == 10000


def test_unknown_statuses_get_the_default_base():
    assert interval([("taxi", "teleporting")]) == 5000


def test_no_active_orders_means_30_s():
    assert interval([]) == 30000


def test_degradation_doubles_it():
    assert interval([("taxi", "driving")], degraded=True) == 6000


def test_overload_raises_it_further():
    assert interval([("taxi", "driving")], overload=3.0) == 9000
    assert overload_factor(in_flight=50, soft_limit=100) == 1.0
    assert overload_factor(in_flight=300, soft_limit=100) == 3.0
    assert overload_factor(in_flight=10_000, soft_limit=100, max_factor=4.0) == 4.0


def test_it_is_clamped_to_1_to_60_s():
    rules = replace(NO_JITTER, status_bases_ms={"taxi:x": 10})
    assert interval([("taxi", "x")], rules=rules) == 1000
    assert interval([("eats", "cooking")], degraded=True, overload=4.0) == 60000


def test_jitter_spreads_clients_within_ten_percent():
    rules = replace(NO_JITTER, jitter=0.1)
    values = {interval([("taxi", "driving")], rules=rules, seed=s) for s in range(200)}
    assert len(values) > 50
    assert min(values) >= 2700 and max(values) <= 3300

"""Admission's lag sampler: close while the process is busy, ten times sparser while it is
quiet (each sample is a wakeup of an otherwise idle process)."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry

from services.bff.admission import Admission
from services.bff.metrics import BffMetrics
from shared.protocol.admission import BudgetLimit


def admission() -> Admission:
    limit = BudgetLimit(min_limit=20, max_limit=2000, budget_ms=250, look_cost_ms=0.5)
    return Admission(
        limit,
        overload_in_flight=500,
        overload_max_factor=4.0,
        retry_after_base_s=2,
        metrics=BffMetrics(CollectorRegistry()),
        rng=random.Random(1),
    )


def test_a_quiet_process_samples_the_lag_sparsely() -> None:
    assert not admission().busy()


def test_a_look_in_progress_is_sampled_closely() -> None:
    busy = admission()
    with busy.admit():
        assert busy.busy()
    assert not busy.busy()


def test_a_lag_above_target_is_sampled_closely_until_the_share_it_cost_is_back() -> None:
    lagging = admission()
    for _ in range(50):
        lagging.limit.observe_lag(100.0)  # a loop 100 ms late, ten times the target
    assert lagging.limit.lag_scale < 1.0
    assert lagging.busy()
    # back under the target, it keeps sampling closely while the share grows back: at the
    # pace it had before the sampler slowed down when quiet
    while lagging.limit.lag_ms > lagging.limit.lag_target_ms:
        lagging.limit.observe_lag(0.0)
    assert lagging.limit.lag_scale < 1.0
    assert lagging.busy()
    while lagging.limit.lag_scale < 1.0:
        lagging.limit.observe_lag(0.0)
    assert not lagging.busy()

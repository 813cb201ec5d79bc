"""Each number declared once (issue 51, item 3): the core's config dataclasses carry their
own defaults, and the settings, mapped to the core's objects by services/bff/resources.py,
give the same objects by default."""

from __future__ import annotations

import dataclasses

from services.bff.config import ProtocolSettings
from services.bff.resources import budget_limit, engine_config, interval_rules, limits, timings
from shared.policy import load_policy
from shared.protocol.admission import BudgetLimit
from shared.protocol.interval import IntervalRules
from shared.protocol.limits import Limits
from shared.protocol.look import EngineConfig
from shared.protocol.need_request import TagTimings

DEFAULTS = ProtocolSettings.model_construct()


def test_the_min_ttls_are_the_protocols_figures():
    """docs/protocol.md: Tags and need_request: min_ttl 2 s, degraded_min_ttl 10 s."""
    assert TagTimings() == TagTimings(min_ttl_ms=2000, degraded_min_ttl_ms=10_000)
    assert timings(DEFAULTS) == TagTimings()


def test_the_settings_build_the_cores_own_defaults():
    policy = load_policy()
    assert engine_config(DEFAULTS, policy) == EngineConfig(
        interval=IntervalRules(status_bases_ms=policy.interval_bases_ms())
    )
    assert interval_rules(DEFAULTS) == IntervalRules()
    assert limits(DEFAULTS) == Limits()
    built, default = budget_limit(DEFAULTS), BudgetLimit()
    assert dataclasses.asdict(built) == dataclasses.asdict(default)


def test_a_setting_changes_the_object_it_maps_to():
    protocol = ProtocolSettings(
        min_ttl_s=0.5, list_max_age_s=30, max_known_orders=5, interval={"jitter": 0.0}
    )
    config = engine_config(protocol, load_policy())
    assert config.timings.min_ttl_ms == 500
    assert config.list_max_age_ms == 30_000
    assert config.interval.jitter == 0.0
    assert limits(protocol).max_known_orders == 5

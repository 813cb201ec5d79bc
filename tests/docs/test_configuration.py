"""Configuration an operator can hold in their head (issue 41, item 4): the services an
operator runs read at most 25 environment variables, docs/configuration.md names every
variable any service reads, and a setting that is not a variable is not read from the
environment, not even as a nested settings object's JSON."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.bff.config import ProtocolSettings
from services.orders_state.config import OrdersStateSettings
from shared.config import operator_variables
from tests.apps import SETTINGS_CLASSES

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
# what an operator deploys; the emulator and the demo page are development tools
OPERATED = ("order_tags", "orders_state", "launch")
MOST_VARIABLES = 25


def variables(services: tuple[str, ...]) -> set[str]:
    return {name for s in services for name, _ in operator_variables(SETTINGS_CLASSES[s])}


def test_the_operated_services_read_at_most_25_variables() -> None:
    operated = variables(OPERATED)
    assert len(operated) <= MOST_VARIABLES, sorted(operated)
    # the ones acceptance checks and deployments set stay
    for name in (
        "REDIS_URL",
        "LOG_LEVEL",
        "MLUTP_SERVICE_TOKEN",
        "ORDER_TAGS_URL",
        "EMULATOR_URL",
        "ORDER_TAGS_PORT",
        "ORDERS_STATE_PORT",
        "LAUNCH_PORT",
        "ORDER_TAGS_HOST",
        "ORDERS_STATE_HOST",
        "LAUNCH_HOST",
    ):
        assert name in operated, name


def test_the_configuration_page_names_every_variable_and_counts_them_right() -> None:
    for name in variables(tuple(SETTINGS_CLASSES)):
        assert f"`{name}`" in CONFIGURATION, f"{name} is read but not in docs/configuration.md"
    said = re.search(r"\*\*(\d+) environment\s+variables\*\*", CONFIGURATION)
    assert said is not None
    assert int(said.group(1)) == len(variables(OPERATED))


def test_no_documented_variable_is_one_the_services_do_not_read() -> None:
    """The tables of the services (not the list of those that are gone, nor the development
    tools' own) name only variables a settings class reads."""
    operated_part = CONFIGURATION.split("## Numbers that are not variables")[0]
    named = set(re.findall(r"`([A-Z][A-Z0-9]*_[A-Z0-9_]+)`", operated_part))
    assert named <= variables(OPERATED), named - variables(OPERATED)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MLUTP_MIN_TTL_S", "7"),
        ("MLUTP_JOIN_TAG_READS", "false"),
        ("MLUTP_WAKEUP_SETTLE_S", "1"),
        ("ORDERS_STATE_PROTOCOL", '{"min_ttl_s": 7}'),
        ("ORDERS_STATE_LISTEN_BACKLOG", "1"),
    ],
)
def test_a_number_that_is_not_a_variable_is_not_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    settings = OrdersStateSettings(service_token="t")
    defaults = OrdersStateSettings.model_construct(protocol=ProtocolSettings.model_construct())
    assert settings.protocol.min_ttl_s == defaults.protocol.min_ttl_s
    assert settings.protocol.join_tag_reads == defaults.protocol.join_tag_reads
    assert settings.wakeup_settle_s == defaults.wakeup_settle_s
    assert settings.listen_backlog == defaults.listen_backlog


def test_an_operator_variable_is_read_and_a_test_sets_the_rest_in_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLUTP_MAX_WAITING", "3")
    monkeypatch.setenv("MLUTP_SOURCE_DEADLINE_S", "0.5")
    settings = OrdersStateSettings(service_token="t", protocol=ProtocolSettings(min_ttl_s=0))
    assert settings.max_waiting == 3
    assert settings.protocol.source_deadline_s == 0.5
    assert settings.protocol.min_ttl_s == 0

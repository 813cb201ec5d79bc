"""Configuration an operator can hold in their head (issue 41, item 4): the services an
operator runs read at most 25 environment variables, docs/configuration.md names every
variable any service reads, and a setting that is not a variable is not read from the
environment, not even as a nested settings object's JSON."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import demo.config as demo_config
import emulator.config as emulator_config
import services.bff.config as bff_config
import services.orders_state.config as orders_state_config
import shared.config as shared_config
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
    assert settings.protocol.tag_reads.join == defaults.protocol.tag_reads.join
    assert settings.waiting.settle_s == defaults.waiting.settle_s
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


# the development tools' own variables (dev.py, the embedded Redis, the fuzz test, compose's
# scale profile) and a prefix named as a family
DEV_VARIABLES = {
    "MLUTP_VENV",
    "MLUTP_REDIS_SERVER",
    "MLUTP_FUZZ_EXAMPLES",
    "MLUTP_REPLICAS",
    "EMULATOR_DRIVER",
}
VARIABLE_NAME = re.compile(
    r"\b((?:MLUTP|REDIS|ORDERS_STATE|ORDER_TAGS|LAUNCH|EMULATOR|DEMO|LOG|TOTW|TAXIROUTE"
    r"|TAXI_ORDER|EATS_ORDER|GROCERY_ORDER|EATS_DETAILS|GROCERY_DETAILS)_[A-Z0-9_]*[A-Z0-9])\b"
)


def config_constants() -> set[str]:
    """The named constants of the settings modules: a document may name those."""
    names: set[str] = set()
    for module in (shared_config, bff_config, orders_state_config, emulator_config, demo_config):
        names |= {name for name in vars(module) if name.isupper()}
    return names


def test_no_document_or_manifest_names_a_variable_nothing_reads() -> None:
    known = variables(tuple(SETTINGS_CLASSES)) | DEV_VARIABLES | config_constants()
    documents = [
        ROOT / "README.md",
        ROOT / "compose.yaml",
        ROOT / "Dockerfile",
        *sorted((ROOT / "openapi").glob("*.yaml")),
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "deploy").rglob("*.yaml")),
        *sorted((ROOT / "deploy").rglob("*.json")),
    ]
    for path in documents:
        text = path.read_text()
        if path.name == "configuration.md":
            # its list of the variables that are gone names them on purpose
            before, _, after = text.partition("## Variables that are gone")
            text = before + after.partition("\n## ")[2]
        unknown = set(VARIABLE_NAME.findall(text)) - known
        assert not unknown, f"{path.relative_to(ROOT)} names variables nothing reads: {unknown}"


def test_the_shared_part_caches_numbers_are_the_pages() -> None:
    """The protocol's `part_cache_ttl` (60 s) and the cache's bounds, as the page gives them,
    are the settings' defaults (docs/protocol.md: Part endpoints)."""
    [row] = [line for line in CONFIGURATION.splitlines() if line.startswith("| shared part cache")]
    said = {name: float(value) for name, value in re.findall(r"`(PART_CACHE_\w+)` ([0-9.]+)", row)}
    cache = ProtocolSettings().part_cache
    assert said == {
        "PART_CACHE_TTL_S": cache.ttl_s,
        "PART_CACHE_MAX_ENTRIES": cache.max_entries,
        "PART_CACHE_MAX_ENTRY_BYTES": cache.max_entry_bytes,
        "PART_CACHE_ZLIB_LEVEL": cache.zlib_level,
    }
    assert cache.ttl_s == bff_config.PART_CACHE_TTL_S == 60

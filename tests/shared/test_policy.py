"""The polling policy file: validated at start-up, a version per service (docs/protocol.md: Polling
policy)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.rollout import rollout_policy_files
from emulator.documents import TAXI_PART_SERVICES
from shared.policy import DEFAULT_POLICY_PATH, PolicyError, Stage, load_policy, parse_policy

RAW: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())


def raw() -> dict[str, Any]:
    return copy.deepcopy(RAW)


def test_the_default_policy_has_the_parts_the_spec_names():
    policy = load_policy()
    taxi = {r.part_name: r for r in policy.services["taxi"].rules}
    assert list(taxi) == ["fast_info", "rarely_changed", "static", "chat", "slow", "route"]
    assert taxi["fast_info"].required and taxi["static"].static
    assert {"route_sharing_url", "currency_rules"} <= set(taxi["static"].fields)
    assert taxi["slow"].fields == ("orderperformerinfo",)
    assert set(taxi["chat"].fields) == {"orderchat", "chathistory"}
    assert taxi["route"].polling_type == "route_distance_depended"
    assert taxi["route"].part_type == "taxiroute"
    [eats] = policy.services["eats"].rules
    assert (eats.part_name, eats.part_type, eats.required) == ("full_info", "eats_full", True)


def test_rules_of_one_service_must_not_share_a_field():
    data = raw()
    data["services"]["taxi"]["rules"][1]["fields"].append("status")
    with pytest.raises(PolicyError, match="'status' is in both 'fast_info' and 'rarely_changed'"):
        parse_policy(data)


def test_a_bad_field_is_named():
    data = raw()
    data["services"]["eats"]["rules"][0]["priority"] = "first"
    with pytest.raises(PolicyError, match=r"services\.eats\.rules\.0\.priority"):
        parse_policy(data)
    data = raw()
    data["services"]["eats"]["rules"][0]["polling_type"] = "whenever"
    with pytest.raises(PolicyError, match=r"services\.eats\.rules\.0\.polling_type"):
        parse_policy(data)


def test_a_yaml_syntax_error_names_the_line(tmp_path: Path):
    bad = tmp_path / "policy.yaml"
    bad.write_text("services:\n  taxi:\n    rules: [\n")
    with pytest.raises(PolicyError, match="line"):
        load_policy(bad)


def test_json_policies_load_too(tmp_path: Path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(RAW))
    assert load_policy(path).version("taxi") == load_policy().version("taxi")


def test_changing_a_services_parts_changes_only_its_policy_version():
    before = parse_policy(raw())
    data = raw()
    data["services"]["taxi"]["rules"][3]["fields"].append("new_chat_field")
    after = parse_policy(data)
    assert after.version("taxi") != before.version("taxi")
    assert after.version("eats") == before.version("eats")
    assert after.version("grocery") == before.version("grocery")


def test_a_parts_own_upstream_is_the_servers_routing_not_handed_out_nor_in_the_version():
    policy = parse_policy(raw())
    slow = next(r for r in policy.services["taxi"].rules if r.part_name == "slow")
    assert (slow.part_type, slow.upstream_name) == ("totw", "orderperformerinfo")
    handed_out = [
        json.loads(bytes(rule)) for rule in policy.launch_rules["taxi", policy.version("taxi")]
    ]
    assert all("upstream" not in rule for rule in handed_out)
    # moving a part to another upstream invalidates no client tag
    data = raw()
    for rule in data["services"]["taxi"]["rules"]:
        rule.pop("upstream", None)
    assert parse_policy(data).version("taxi") == policy.version("taxi")
    data["services"]["taxi"]["rules"][0]["upstream"] = "elsewhere"
    assert parse_policy(data).version("taxi") == policy.version("taxi")


def test_the_version_covers_what_a_part_means_and_where_a_client_gets_it():
    before = parse_policy(raw()).version("taxi")
    for key, value in (
        ("part_name", "fast"),
        ("fields", ["version", "status"]),
        ("part_type", "totw2"),
        ("url", "/mlutp/v2/taxi/fast_info"),
        ("polling_type", "route_distance_depended"),
    ):
        data = raw()
        data["services"]["taxi"]["rules"][0][key] = value
        assert parse_policy(data).version("taxi") != before, key


def test_priority_required_and_static_change_no_version():
    # they only order and pace the fetches: new values reach clients at their next launch
    before = parse_policy(raw()).version("taxi")
    data = raw()
    data["services"]["taxi"]["rules"][0]["priority"] = 9
    data["services"]["taxi"]["rules"][0]["required"] = False
    data["services"]["taxi"]["rules"][1]["static"] = True
    assert parse_policy(data).version("taxi") == before


def test_an_announced_version_is_served_and_may_be_handed_out_but_is_not_current():
    policy = parse_policy(rollout_policy_files()["announcing"])
    taxi = policy.services["taxi"]
    assert taxi.policy_version == parse_policy(raw()).version("taxi")
    [announced] = [v for v, stage in taxi.stages.items() if stage is Stage.ANNOUNCED]
    served = {e.rule.url for e in policy.endpoints if e.policy_version == announced}
    assert "/mlutp/v2/taxi/eta" in served
    assert all(
        e.stage is Stage.ANNOUNCED for e in policy.endpoints if e.policy_version == announced
    )
    # launch may hand it out (to a client told it), the deprecated one never
    assert ("taxi", announced) in policy.launch_rules
    deprecated = taxi.deprecated[0].policy_version
    assert ("taxi", deprecated) not in policy.launch_rules


def test_an_announced_version_must_differ_from_every_other():
    data = raw()
    data["services"]["taxi"]["announced"] = [{"rules": data["services"]["taxi"]["rules"]}]
    with pytest.raises(PolicyError, match="the same rules as the current version"):
        parse_policy(data)


def test_every_part_of_every_served_version_has_its_own_content_tag():
    policy = parse_policy(rollout_policy_files()["announcing"])
    taxi = policy.services["taxi"]
    # static parts are never refetched for a change; route is polled by the client's rule
    assert taxi.tagged_parts == ("chat", "eta", "fast_info", "main", "rarely_changed", "slow")
    # a feature changing eta bumps every part of every version that holds it
    assert taxi.parts_holding({"eta"}) == ["eta", "fast_info", "main"]
    assert taxi.parts_holding({"orderchat"}) == ["chat"]
    assert taxi.parts_holding({"route_sharing_url"}) == []


def test_the_version_does_not_depend_on_the_order_of_rules():
    data = raw()
    data["services"]["taxi"]["rules"].reverse()
    assert parse_policy(data).version("taxi") == parse_policy(raw()).version("taxi")


def test_a_deprecated_version_must_match_its_rules():
    data = raw()
    data["services"]["taxi"]["deprecated"][0]["version"] = "0000000000"
    with pytest.raises(PolicyError, match="does not match"):
        parse_policy(data)


def test_deprecated_endpoints_are_served_with_their_version():
    policy = load_policy()
    deprecated = [e for e in policy.endpoints if e.stage is Stage.DEPRECATED]
    assert {e.rule.url for e in deprecated} == {"/mlutp/v0/taxi/main", "/mlutp/v0/taxi/static"}
    assert {e.policy_version for e in deprecated} == {
        RAW["services"]["taxi"]["deprecated"][0]["version"]
    }


def test_two_rules_may_not_share_a_url():
    data = raw()
    data["services"]["eats"]["rules"][0]["url"] = "/mlutp/v1/taxi/fast_info"
    with pytest.raises(PolicyError, match="is used by"):
        parse_policy(data)


def test_a_service_with_a_bad_policy_file_does_not_start(tmp_path: Path):
    data = raw()
    data["services"]["taxi"]["rules"][0]["fields"] = []
    bad = tmp_path / "policy.yaml"
    bad.write_text(yaml.safe_dump(data))
    env = {**os.environ, "MLUTP_SERVICE_TOKEN": "t", "MLUTP_POLICY_PATH": str(bad)}
    result = subprocess.run(
        [sys.executable, "-m", "services.orders_state"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "services.taxi.rules.0.fields" in result.stderr


def test_a_service_started_alone_refuses_to_start_without_the_token():
    env = {k: v for k, v in os.environ.items() if k != "MLUTP_SERVICE_TOKEN"}
    for module in ("services.order_tags", "services.orders_state", "services.launch", "emulator"):
        result = subprocess.run(
            [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 2, module
        assert "MLUTP_SERVICE_TOKEN" in result.stderr


def test_the_files_of_a_rollout_agree_on_each_versions_name():
    files = {
        name: parse_policy(data).services["taxi"] for name, data in rollout_policy_files().items()
    }
    old, new = files["old"].policy_version, files["new"].policy_version
    assert old != new
    assert files["announcing"].stages[old] is Stage.CURRENT
    assert files["announcing"].stages[new] is Stage.ANNOUNCED
    assert files["new"].stages[old] is Stage.DEPRECATED
    assert old not in files["settled"].stages and files["settled"].policy_version == new


def test_the_versions_of_a_service_together_tag_at_most_32_parts():
    # order_tags holds at most 32 parts per order, and every served version's parts are tagged
    data = raw()
    data["services"]["taxi"]["announced"] = [
        {
            "rules": [
                {
                    "part_name": f"p{index}",
                    "url": f"/mlutp/v9/taxi/p{index}",
                    "fields": [f"field{index}"],
                    "polling_type": "tag_defined",
                    "part_type": "totw",
                    "priority": index,
                }
                for index in range(28)
            ]
        }
    ]
    with pytest.raises(PolicyError, match="at most 32"):
        parse_policy(data)


def test_every_default_taxi_part_comes_from_a_service_of_its_own():
    """docs/protocol.md: Part endpoints, stage 4: each taxi part from its own service, none
    from totw's whole document; the emulator serves each (emulator/documents.py)."""
    rules = [r for r in load_policy().services["taxi"].rules if r.part_type == "totw"]
    upstreams = [r.upstream_name for r in rules]
    assert "totw" not in upstreams and len(set(upstreams)) == len(rules)
    for rule in rules:
        assert set(rule.fields) == set(TAXI_PART_SERVICES[rule.upstream_name]), rule.part_name

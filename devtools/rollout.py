"""A taxi policy rollout, as files (docs/operating.md: Rolling out a policy change): the next
layout of the taxi parts and the policy file of each deploy on the way to it. The conformance
kit changes a running stack's policy with them; the tests roll fleets over them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from shared.policy import DEFAULT_POLICY_PATH

# deploys in the order operators make them
ROLLOUT_STAGES = ("old", "announcing", "new", "settled")


def policy_file(path: Path = DEFAULT_POLICY_PATH) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def next_taxi_rules(policy: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A next layout of the taxi parts, as a rollout brings it: `eta` moved out of fast_info
    into a part of its own, every url under /v2/."""
    policy = policy if policy is not None else policy_file()
    rules: list[dict[str, Any]] = copy.deepcopy(policy["services"]["taxi"]["rules"])
    for rule in rules:
        rule["url"] = rule["url"].replace("/v1/", "/v2/")
    rules[0]["fields"].remove("eta")
    rules.append(
        {
            "part_name": "eta",
            "url": "/mlutp/v2/taxi/eta",
            "fields": ["eta"],
            "polling_type": "tag_defined",
            "part_type": "totw",
            "priority": 1,
        }
    )
    return rules


def rollout_policy_files(policy: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The policy files of the taxi rollout to next_taxi_rules, by stage: `old` (the given
    policy, the default one by default), `announcing` (the next version announced), `new` (it
    is current, the old one deprecated), `settled` (the old one dropped)."""
    old = copy.deepcopy(policy if policy is not None else policy_file())
    announcing = copy.deepcopy(old)
    announcing["services"]["taxi"]["announced"] = [{"rules": next_taxi_rules(old)}]
    new = copy.deepcopy(old)
    taxi = new["services"]["taxi"]
    taxi["deprecated"] = [{"rules": taxi["rules"]}, *taxi.get("deprecated", [])]
    taxi["rules"] = next_taxi_rules(old)
    settled = copy.deepcopy(new)
    settled["services"]["taxi"]["deprecated"] = old["services"]["taxi"].get("deprecated", [])
    files = {"old": old, "announcing": announcing, "new": new, "settled": settled}
    return {stage: files[stage] for stage in ROLLOUT_STAGES}


def write_rollout(directory: Path) -> dict[str, Path]:
    """Each stage's policy file written under `directory`: stage → its path."""
    paths = {}
    for stage, data in rollout_policy_files().items():
        paths[stage] = directory / f"{stage}.yaml"
        paths[stage].write_text(yaml.safe_dump(data))
    return paths

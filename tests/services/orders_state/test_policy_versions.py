"""Policy versions on one replica of each file of a rollout (docs/protocol.md: Policy changes):
what a client naming a version is answered by, told to hold and handed out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from aiohttp.test_utils import TestClient

from devtools.rollout import rollout_policy_files
from shared.policy import parse_policy
from tests.emulator_api import create_order_id
from tests.helpers import MakeApp, poll

FILES = rollout_policy_files()
OLD = parse_policy(FILES["old"]).version("taxi")
NEW = parse_policy(FILES["new"]).version("taxi")
FIRST = parse_policy(FILES["old"]).services["taxi"].deprecated[0].policy_version


async def replicas_on(
    name: str, tmp_path: Path, make_orders_state: MakeApp, make_launch: MakeApp
) -> tuple[TestClient, TestClient]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(FILES[name]))
    protocol = {"policy_path": path}
    return await make_orders_state(protocol=protocol), await make_launch(protocol=protocol)


async def ask(
    client: TestClient, user: str, version: str | None, path: str = "/mlutp/v1/orders/state"
) -> dict[str, Any]:
    """A poll (or a launch) of the user's taxi orders, naming the version it holds (or was
    told)."""
    body: dict[str, Any] = {"supported_services": ["taxi"]}
    if version is not None:
        body["policy_versions"] = {"taxi": version}
    status, answer, _ = await poll(client, user, body, path)
    assert status == 200, answer
    return answer


async def state(client: TestClient, user: str, held: str | None) -> dict[str, Any]:
    return await ask(client, user, held)


async def launched(client: TestClient, user: str, told: str | None) -> dict[str, Any]:
    result: dict[str, Any] = (await ask(client, user, told, "/4.0/launch"))["mlutp_orders_state"]
    return result


async def test_a_file_announcing_a_version_hands_it_out_only_to_a_client_told_it(
    make_orders_state: MakeApp,
    make_launch: MakeApp,
    emulator: TestClient,
    unique: str,
    tmp_path: Path,
):
    orders_state, launch = await replicas_on("announcing", tmp_path, make_orders_state, make_launch)
    await create_order_id(emulator, unique, status="driving")

    first = await launched(launch, unique, None)
    assert first["policy_versions"] == {"taxi": OLD}
    assert all("/v1/" in rule["url"] for rule in first["polling_policy"])
    told = await launched(launch, unique, NEW)
    assert told["policy_versions"] == {"taxi": NEW}
    assert {rule["part_name"] for rule in told["polling_policy"]} >= {"eta", "fast_info"}
    assert all("/v2/" in rule["url"] for rule in told["polling_policy"])
    # the orders of a launch are decided by the version it hands out
    assert "eta" in told["orders"][0]["need_request"]

    # a client holding the announced version keeps it here: no relaunch
    # (a poll names only what the client must change of what it named: nothing here)
    on_new = await state(orders_state, unique, NEW)
    assert on_new["policy_versions"] == {}
    assert "eta" in on_new["orders"][0]["need_request"]
    assert (await state(orders_state, unique, OLD))["policy_versions"] == {}
    assert (await state(orders_state, unique, None))["policy_versions"] == {"taxi": OLD}


async def test_a_client_on_a_deprecated_version_is_answered_by_it_and_told_the_current(
    make_orders_state: MakeApp,
    make_launch: MakeApp,
    emulator: TestClient,
    unique: str,
    tmp_path: Path,
):
    orders_state, launch = await replicas_on("new", tmp_path, make_orders_state, make_launch)
    await create_order_id(emulator, unique, status="driving")
    for deprecated in (OLD, FIRST):
        answer = await state(orders_state, unique, deprecated)
        assert answer["policy_versions"] == {"taxi": NEW}
        # until it launches again, its orders are answered by its own version's parts
        rules = parse_policy(FILES["new"]).services["taxi"].versions[deprecated]
        parts = {rule.part_name for rule in rules if rule.tag_defined}
        assert set(answer["orders"][0]["need_request"]) == parts
        # and launch, told a deprecated version, hands out the current one
        assert (await launched(launch, unique, deprecated))["policy_versions"] == {"taxi": NEW}
    # a version no file serves is not bad input: the client is told the current one
    assert (await state(orders_state, unique, "0123456789"))["policy_versions"] == {"taxi": NEW}

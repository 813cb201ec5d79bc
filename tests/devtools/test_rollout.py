"""A policy rollout on a fleet mid-deploy (docs/protocol.md: Policy changes; docs/operating.md:
Rolling out a policy change): two orders_state and two launch processes, replica 0 on one
policy file and replica 1 on the next, and a reference client taken in turn between them
request by request, as a balancer does. Whatever the pair, the client switches version at most
once, fetches each part of each version once, launches at most twice, and a change made
mid-rollout reaches it."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from client.client import MlutpClient
from client.model import ClientOptions
from devtools.rollout import rollout_policy_files
from devtools.stack import STACK, Stack
from shared.policy import parse_policy
from tests.stack_api import emulator_post, metric, samples, stack_env, stack_settings, totw_fields

FILES = rollout_policy_files()
VERSIONS = {name: parse_policy(data).version("taxi") for name, data in FILES.items()}
TAXI_PARTS = {
    version: {
        rule.part_name
        for rule in parse_policy(data).services["taxi"].versions[version]
        if rule.tag_defined
    }
    for data in FILES.values()
    for version in parse_policy(data).services["taxi"].versions
}

# (replica 0's file, replica 1's file, the version the client ends on). Each pair is one
# deploy of the rollout half done; the other services run on replica 0's file.
FLEETS = {
    "announce": ("old", "announcing", "old"),
    "switch": ("announcing", "new", "new"),
    "drop": ("new", "settled", "new"),
}


@pytest.fixture(params=FLEETS.values(), ids=FLEETS.keys())
async def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Stack, str]]:
    first, second, ends_on = request.param
    paths = {}
    for name in (first, second):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(FILES[name]))
    env = stack_env(MLUTP_POLICY_PATH=str(paths[first]))
    services = [s for s in STACK if s.name != "demo"]
    stack = Stack(
        env,
        services,
        replicas=2,
        replica_env={1: {"MLUTP_POLICY_PATH": str(paths[second])}},
        settings=stack_settings(),
    )
    try:
        await stack.start(ready_timeout_s=60)
        yield stack, VERSIONS[ends_on]
    finally:
        await stack.close()


async def part_requests(session: aiohttp.ClientSession, stack: Stack) -> Counter[tuple[str, str]]:
    """(policy version, part) → requests, over every replica: part endpoints, and launch's
    inline required parts."""
    counted: Counter[tuple[str, str]] = Counter()
    for url in stack.urls("orders_state") + stack.urls("launch"):
        for sample in await samples(session, url, "mlutp_part_requests_total"):
            counted[sample.labels["policy_version"], sample.labels["part"]] += int(sample.value)
    return counted


async def requests_to(session: aiohttp.ClientSession, urls: list[str], route: str) -> list[int]:
    """Requests each of these processes answered on a route."""
    return [int(await metric(session, url, "http_requests_total", route=route)) for url in urls]


async def test_a_client_alternating_over_a_fleet_mid_rollout_switches_at_most_once(
    fleet: tuple[Stack, str], session: aiohttp.ClientSession, unique: str
) -> None:
    stack, ends_on = fleet
    order = await emulator_post(
        session, stack, "/emulator/v1/orders", {"user_id": unique, "service": "taxi"}
    )
    orderid = order["orderid"]
    client = MlutpClient(
        session,
        launch_url=[f"{url}/4.0/launch" for url in stack.urls("launch")],
        orders_state_url=stack.urls("orders_state"),
        user_id=unique,
        supported_services=["taxi"],
        options=ClientOptions(backoff_base_s=0, poll_route=False),
        rng=random.Random(unique),
    )
    for _ in range(8):
        await client.cycle()

    assert client.policy_versions == {"taxi": ends_on}
    # both replicas of each answered the client: it was spread, not pinned
    polls = await requests_to(session, stack.urls("orders_state"), "/mlutp/v1/orders/state")
    assert all(polls), polls
    # no relaunch loop: the first launch, and one more where the client was told to switch
    launches = sum(await requests_to(session, stack.urls("launch"), "/4.0/launch"))
    fetched = await part_requests(session, stack)
    versions = {version for version, _ in fetched}
    assert launches == len(versions) <= 2, (launches, fetched)
    # each part of each version held fetched once: none again on the other replica's file
    assert all(count == 1 for count in fetched.values()), fetched
    assert {part for version, part in fetched if version == ends_on} == TAXI_PARTS[ends_on]
    [view] = client.view()
    assert view.data == await totw_fields(session, stack, unique, orderid)

    # a change made mid-rollout reaches the client, fetching only the parts holding it, once
    changed = await emulator_post(
        session,
        stack,
        f"/emulator/v1/orders/taxi/{orderid}/change",
        # eta: in fast_info of the old version, in a part of its own in the next
        {"fields": {"comment": "mid-rollout", "eta": {"minutes": 42}}},
    )
    for _ in range(4):
        await client.cycle()
    [view] = client.view()
    assert view.data == await totw_fields(session, stack, unique, orderid)
    assert (view.data["comment"], view.data["eta"]) == ("mid-rollout", {"minutes": 42})
    refetched = await part_requests(session, stack) - fetched
    bumped = set(changed["tags"]) & TAXI_PARTS[ends_on]
    assert "rarely_changed" in bumped
    assert refetched == Counter({(ends_on, part): 1 for part in bumped}), refetched
    assert client.policy_versions == {"taxi": ends_on}
    assert client.stats.errors == 0

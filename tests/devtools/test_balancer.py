"""Routing by user (docs/protocol.md: A fleet; issue 47): three orders_state replicas behind
the shipped balancer config (deploy/haproxy/haproxy.cfg, run by a real haproxy), the tag
store's Redis stopped. One user's three devices asking for an order's changing part at once
meet in one process and cost its upstream one call, as on one process; sprayed over the
replicas (`balance roundrobin`) the same fetch costs one call per replica it reached."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from benchmarks.fleet_routing import (
    DEVICES,
    SPRAYED,
    USER,
    background_users,
    balancer,
    changing_part,
    fetch_round,
    fleet,
    in_service,
    new_order,
    part_requests_by_replica,
    parts_started_by_replica,
)
from devtools.balancer import haproxy_binary
from devtools.stack import Stack

REPLICAS = 3
ROUNDS = 3


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    if haproxy_binary() is None:
        pytest.skip("haproxy is not installed (Debian's haproxy package; .ci/run installs it)")
    stack = fleet(REPLICAS)
    try:
        await stack.start(ready_timeout_s=60)
        yield stack
    finally:
        await stack.close()


async def test_one_users_parts_meet_in_one_replica_and_cost_one_call_while_the_store_is_down(
    stack: Stack, session: aiohttp.ClientSession
) -> None:
    async with balancer(stack) as routed, balancer(stack, SPRAYED) as sprayed:
        # the stack is the test's own: a user of a fixed name, placed by the hash the same
        # way on every run. A fresh order per round: each round is a degraded-memo window
        # (10 s) of its own
        orders = [await new_order(session, stack, USER) for _ in range(2 * ROUNDS)]
        assert stack.redis is not None
        stack.redis.stop()
        # other users' requests held on the replicas, as a fleet in service has: the bound
        # of the balancer's load (3 times the average in flight) leaves one user's parts
        # together (on an idle fleet of 3 too: benchmarks/fleet_routing.py)
        users = background_users(REPLICAS)
        async with in_service(session, stack, routed.url, users):
            before = await part_requests_by_replica(session, stack, [changing_part()[0]])
            routed_calls = [
                await fetch_round(session, stack, routed.url, USER, orderid)
                for orderid in orders[:ROUNDS]
            ]
            after_routed = await part_requests_by_replica(session, stack, [changing_part()[0]])
            sprayed_calls = [
                await fetch_round(session, stack, sprayed.url, USER, orderid)
                for orderid in orders[ROUNDS:]
            ]
            after_sprayed = await part_requests_by_replica(session, stack, [changing_part()[0]])
            others = await parts_started_by_replica(session, stack, "slow")
    print(
        f"upstream calls per round on {REPLICAS} replicas: routed {routed_calls}, "
        f"sprayed {sprayed_calls}"
    )
    # what one process gives: the devices' requests joined in one call
    assert routed_calls == [1] * ROUNDS
    # every request of the user on one replica
    landed = [a - b for a, b in zip(after_routed, before, strict=True)]
    assert sorted(landed) == [0] * (REPLICAS - 1) + [DEVICES * ROUNDS], landed
    # the other users spread over the replicas: hashing by user is no single replica
    assert sum(1 for count in others if count) >= 2, others
    # sprayed, each replica the parts reach pays its own call
    spread = [a - b for a, b in zip(after_sprayed, after_routed, strict=True)]
    assert sum(1 for count in spread if count) == REPLICAS, spread
    assert sprayed_calls == [REPLICAS] * ROUNDS

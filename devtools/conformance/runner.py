"""The kit's run: a stack of its own (short intervals, no min TTL, the emulator's driver off:
only the scenarios change orders), the recording pass-through in front of it, and each
scenario with a user of its own, then the general checks over that user's exchanges."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

from devtools.conformance import checks
from devtools.conformance.clients import ClientUnderTest
from devtools.conformance.kit import Kit, route_urls
from devtools.conformance.recording import Exchange, Recorder, create_app
from devtools.conformance.scenarios import SCENARIOS
from devtools.rollout import write_rollout
from devtools.stack import STACK, Stack, free_ports_env
from shared.embedded_redis import free_port
from shared.policy import DEFAULT_POLICY_PATH, PollingType, load_policy

KIT_ENV = {"EMULATOR_DRIVER_ENABLED": "false", "LOG_LEVEL": "WARNING"}
# the kit's stack: intervals of a second or two, so that a scenario takes seconds
KIT_PROTOCOL = {"min_ttl_s": 0, "interval": {"max_ms": 2000, "no_orders_ms": 2000}}
KIT_SETTINGS = {"orders_state": {"protocol": KIT_PROTOCOL}, "launch": {"protocol": KIT_PROTOCOL}}


@dataclass
class Result:
    scenario: str
    passed: bool
    problems: list[str]
    requests: int


def part_urls(
    policy_paths: Iterable[Path] = (DEFAULT_POLICY_PATH,),
) -> dict[str, tuple[str, str, int]]:
    """A part endpoint's path → (service, part name, priority), of every version these policy
    files serve; the route's own rule is not need_request's."""
    return {
        endpoint.rule.url: (endpoint.service, endpoint.rule.part_name, endpoint.rule.priority)
        for path in policy_paths
        for endpoint in load_policy(path).endpoints
        if endpoint.rule.polling_type != PollingType.ROUTE_DISTANCE_DEPENDED
    }


def check(exchanges: Sequence[Exchange], policy_paths: Iterable[Path]) -> list[str]:
    # what the client never saw does not bind it
    exchanges = [e for e in exchanges if not e.abandoned]
    urls = part_urls(policy_paths)
    route_parts = frozenset(route_urls(policy_paths).values())
    found = {
        "interval": checks.interval_kept(exchanges),
        "need_request": checks.need_request_fetched(exchanges, urls),
        "tags": checks.tags_sent_back(exchanges, urls, route_parts),
        "force": checks.force_only_while_unseen(exchanges),
        "stale echo": checks.stale_orders_kept_with_echo(exchanges),
        "version echo": checks.versions_echoed(exchanges),
        "nothing new": checks.answer_kept(exchanges),
        "digest": checks.digests_stand_for_previous(exchanges),
        "position": checks.position_shaped(exchanges, urls),
    }
    return [f"{name}: {problem}" for name, problems in found.items() for problem in problems]


async def run_kit(client: ClientUnderTest, names: Sequence[str], work_dir: Path) -> list[Result]:
    """`work_dir`: where the kit writes its policy files."""
    policy_paths = write_rollout(work_dir)
    env = {
        **os.environ,
        **free_ports_env(),
        **KIT_ENV,
        # the next taxi layout announced: the policy change scenario deploys it
        "MLUTP_POLICY_PATH": str(policy_paths["announcing"]),
    }
    env.pop("REDIS_URL", None)
    env.pop("REDIS_CLUSTER_NODES", None)
    stack = Stack(env, [s for s in STACK if s.name != "demo"], settings=KIT_SETTINGS)
    await stack.start()
    recorder = Recorder(stack.url("launch"), stack.url("orders_state"), stack.url("emulator"))
    runner = web.AppRunner(create_app(recorder))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    base = f"http://127.0.0.1:{port}"
    results = []
    try:
        async with aiohttp.ClientSession() as session:
            for name in names:
                user = f"conformance-{uuid.uuid4().hex[:8]}"
                kit = Kit(session, stack, recorder, client, user, policy_paths)
                await client.start(user, f"{base}/4.0/launch", base)
                try:
                    problems = await SCENARIOS[name](kit)
                except TimeoutError as exc:
                    problems = [str(exc)]
                finally:
                    await client.stop()
                    for put_back in kit.after:
                        await put_back()
                exchanges = kit.exchanges()
                problems += check(exchanges, policy_paths.values())
                results.append(Result(name, not problems, problems, len(exchanges)))
    finally:
        await client.close()
        await runner.cleanup()
        await stack.close()
    return results


def print_table(client: str, results: Sequence[Result]) -> None:
    width = max(len(r.scenario) for r in results)
    print(f"conformance of the {client} client")
    for result in results:
        verdict = "pass" if result.passed else "FAIL"
        print(f"{result.scenario:<{width}}  {verdict}  {result.requests:>4} requests")
        for problem in result.problems:
            print(f"{'':<{width}}        {problem}")


def write_report(path: Path, client: str, results: Sequence[Result]) -> None:
    report = {
        "client": client,
        "passed": all(r.passed for r in results),
        "scenarios": [asdict(r) for r in results],
    }
    path.write_text(json.dumps(report, indent=2) + "\n")


def run(client: ClientUnderTest, names: Sequence[str], report: Path | None, work_dir: Path) -> int:
    results = asyncio.run(run_kit(client, names, work_dir))
    print_table(client.name, results)
    if report is not None:
        write_report(report, client.name, results)
    return 0 if all(r.passed for r in results) else 1

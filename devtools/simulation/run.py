"""One run: a seed's plan played in virtual time against the real engine, with every
invariant checked, and its report (devtools/simulation/report.py), as its options
(devtools/simulation/options.py) say."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache

from devtools.simulation.bff import BffProcess
from devtools.simulation.checks import Checker
from devtools.simulation.clients import ProtocolClient
from devtools.simulation.misbehaving import MisbehavingClient
from devtools.simulation.network import Network, Router, SprayingRouter, UserRouter
from devtools.simulation.options import DEFAULT_OPTIONS, Options
from devtools.simulation.report import Report
from devtools.simulation.scenario import DURATION_S, Fault, OrderPlan, Scenario, Step, plan
from devtools.simulation.store import SimTagStore
from devtools.simulation.trace import ClientInfo
from devtools.simulation.upstreams import (
    CallLog,
    SourceBackend,
    SourceClient,
    UpstreamBackend,
    UpstreamClient,
)
from devtools.simulation.upstreams import Fault as UpstreamFault
from devtools.simulation.vloop import run_virtual
from devtools.simulation.world import World, Writes
from shared.policy import PollingPolicy, load_policy
from shared.wire import OrderKey

# after the run's end, how long the clients' last requests may take to come back
DRAIN_S = 30.0
# the product's warnings of the faults a run injects on purpose (the shared part cache's,
# once per real period): the run's trace tells of those faults, not stderr
QUIET_LOGGERS = ("mlutp.part_cache",)


@cache
def policy() -> PollingPolicy:
    return load_policy()


class Faults:
    """Applies the schedule: each fault on at its start and off at its end, overlapping ones
    of one target taking turns (the latest on wins until it ends)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.active: dict[str, list[Fault]] = {}

    def _set(self, target: str) -> None:
        faults = self.active.get(target, [])
        current = faults[-1] if faults else None
        run = self.run
        if target == "store":
            run.store.down = any(f.kind in ("store_down", "redis_outage") for f in faults)
            run.store.paused = any(f.kind == "store_paused" for f in faults)
        elif target == "messages":
            run.store.message_loss = max((f.value for f in faults), default=0.0)
        elif target == "bumps":
            loss = max((f.value for f in faults), default=0.0)
            run.world.writes.part_bump_loss = run.world.writes.list_bump_loss = loss
        elif target.startswith("source:"):
            source = run.sources[target.removeprefix("source:")]
            source.fault = (
                UpstreamFault(current.kind.removeprefix("source_"), current.value)
                if current is not None
                else UpstreamFault()
            )
        elif target.startswith("upstream:"):
            upstream = run.upstreams[target.removeprefix("upstream:")]
            upstream.fault = (
                UpstreamFault(current.kind.removeprefix("upstream_"), current.value)
                if current is not None
                else UpstreamFault()
            )

    @staticmethod
    def _target(fault: Fault) -> str:
        if fault.kind in ("store_down", "store_paused", "redis_outage"):
            return "store"
        if fault.kind == "message_loss":
            return "messages"
        if fault.kind == "bump_loss":
            return "bumps"
        if fault.kind.startswith("source_"):
            return f"source:{fault.target}"
        if fault.kind.startswith("upstream_"):
            return f"upstream:{fault.target}"
        return fault.kind

    async def play(self, faults: Sequence[Fault]) -> None:
        loop = asyncio.get_running_loop()
        events: list[tuple[float, int, bool, Fault]] = []
        for index, fault in enumerate(faults):
            events.append((fault.start, index, True, fault))
            if fault.end > fault.start:
                events.append((fault.end, index, False, fault))
        for at, _, starting, fault in sorted(events, key=lambda e: (e[0], e[1], not e[2])):
            await asyncio.sleep(max(0.0, at - loop.time()))
            self.run.checker.note(
                at, "", f"fault {'on' if starting else 'off'}: {fault.describe()}"
            )
            self._apply(fault, starting)

    def _apply(self, fault: Fault, starting: bool) -> None:
        run = self.run
        target = self._target(fault)
        if fault.kind == "flush":
            run.store.flush()
            return
        if fault.kind == "pubsub_lost":
            for process in run.processes:
                if process is not None and (not fault.target or process.name == fault.target):
                    process.hub.lose()
            return
        if fault.kind == "replica_restart":
            run.restart(int(fault.target.removeprefix("r")), fault.value)
            return
        faults = self.active.setdefault(target, [])
        if starting:
            faults.append(fault)
        elif fault in faults:
            faults.remove(fault)
        self._set(target)
        if fault.kind == "redis_outage":
            if starting:
                run.store.lose_connections()
            elif fault.empty:
                run.store.flush()


class Run:
    def __init__(self, scenario: Scenario, options: Options = DEFAULT_OPTIONS) -> None:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.scenario = scenario
        self.policy = policy()
        self.store = SimTagStore(self.rng("store"), lambda: int(time.time() * 1000))
        self.world = World(
            self.policy,
            self.store,
            self.rng("world"),
            Writes(),
            lossy_writers=options.lossy_writers,
            writers_rng=self.rng("writers"),
        )
        self.calls = CallLog()
        self.sources = {
            service: SourceBackend(
                service,
                self.world,
                self.rng(f"source:{service}"),
                self.calls,
                untagged_replica=options.untagged_replicas,
            )
            for service in self.policy.services
        }
        names = sorted({e.rule.upstream_name for e in self.policy.endpoints if e.rule.tag_defined})
        self.upstreams = {
            name: UpstreamBackend(name, self.world, self.rng(f"upstream:{name}"), self.calls)
            for name in names
        }
        infos = [
            ClientInfo(
                device.name,
                user.user_id,
                device.wait_ms,
                device.legacy_period_s,
                device.start_t,
                user.misbehaving,
            )
            for user in scenario.users
            for device in user.devices
        ]
        self.options = options
        self.checker = Checker(
            scenario, self.world, self.store, self.policy, infos, watch_cache=options.watch_cache
        )
        self.generations = [0] * scenario.replicas
        self.processes: list[BffProcess | None] = [
            self._process(index) for index in range(scenario.replicas)
        ]
        self.clients: dict[str, ProtocolClient] = {}
        self.misbehaving: list[MisbehavingClient] = []
        by_user = UserRouter([f"r{index}" for index in range(scenario.replicas)])
        for user in scenario.users:
            for device in user.devices:
                router: Router = SprayingRouter() if options.spraying_router else by_user
                network = Network(self.replicas, router, self.rng(f"network:{device.name}"))
                if user.misbehaving:
                    self.misbehaving.append(
                        MisbehavingClient(
                            device.name,
                            user.user_id,
                            self.world,
                            self.policy,
                            network,
                            self.rng(f"client:{device.name}"),
                        )
                    )
                else:
                    self.clients[device.name] = ProtocolClient(
                        device.name,
                        user.user_id,
                        device.wait_ms,
                        self.policy,
                        network,
                        self.checker,
                        self.rng(f"client:{device.name}"),
                        at_once_after_expired=options.at_once_after_expired,
                    )
        self._tasks: list[asyncio.Task[None]] = []

    def rng(self, name: str) -> random.Random:
        return random.Random(f"{self.scenario.seed}:{name}")

    def _process(self, index: int) -> BffProcess:
        generation = self.generations[index]
        clock = self.loop.time
        return BffProcess(
            f"r{index}",
            self.policy,
            self.store,
            {name: SourceClient(backend, clock) for name, backend in self.sources.items()},
            {name: UpstreamClient(backend, clock) for name, backend in self.upstreams.items()},
            self.checker,
            self.rng(f"process:{index}:{generation}"),
            watch_cache=self.options.watch_cache,
        )

    def replicas(self) -> list[BffProcess]:
        return [process for process in self.processes if process is not None]

    def restart(self, index: int, down_s: float) -> None:
        process = self.processes[index]
        if process is None:
            return
        self.processes[index] = None
        self._tasks.append(self.loop.create_task(self._restart(index, process, down_s)))

    async def _restart(self, index: int, process: BffProcess, down_s: float) -> None:
        await self._stop(process)
        await asyncio.sleep(down_s)
        self.generations[index] += 1
        self.processes[index] = self._process(index)

    async def _stop(self, process: BffProcess) -> None:
        took = await process.stop()
        self.store.subscribers.remove(process.hub)
        self.checker.process_stopped(
            process.name, self.loop.time(), took, process.holding, parts=process.parts_at_stop
        )

    async def _order(self, order: OrderPlan) -> None:
        await asyncio.sleep(max(0.0, order.create_t - self.loop.time()))
        orderid = self.world.new_orderid(order.service)
        made = await self.world.create(order.user_id, order.service, orderid)
        self.checker.note(
            self.loop.time(),
            order.user_id,
            f"world: {orderid} created{' on ' + order.device if order.device else ' elsewhere'}"
            f" (tags {made.tags_written_t}, list bump {made.created_bump_t})",
        )
        client = self.clients.get(order.device)
        if client is not None:
            client.order_created(made.key, made.status)
        for step in order.steps:
            await asyncio.sleep(max(0.0, step.t - self.loop.time()))
            await self._step(made.key, order.user_id, step)

    async def _step(self, key: OrderKey, user_id: str, step: Step) -> None:
        if step.kind in ("advance", "cancel"):
            change = await self.world.advance(key, cancel=step.kind == "cancel")
            if change is not None:
                self.checker.note(
                    self.loop.time(),
                    user_id,
                    f"world: {key.orderid} -> {change.status} v{change.version} "
                    f"(data {change.data_t:.3f}, parts {change.part_bump_t}, "
                    f"list bump {change.list_bump_t})",
                )
        elif step.kind == "change":
            client = self.clients.get(step.device)
            if client is None:
                return
            make = self._user_change(client, key, step)
            if step.after_fetch:
                client.after_next_fetch(key, make)
            else:
                await make()
        else:
            await self.world.touch(key, step.kind)

    def _user_change(
        self, client: ProtocolClient, key: OrderKey, step: Step
    ) -> Callable[[], asyncio.Future[None]]:
        async def change() -> None:
            value = f"{step.feature} at {self.loop.time():.3f}"
            made = await self.world.change_by_user(key, step.feature, value)
            if made is not None:
                self.checker.note(
                    self.loop.time(),
                    client.user_id,
                    f"world: {client.name} changed {key.orderid} {step.feature}: v{made.version}"
                    f" (parts {made.part_bump_t})",
                )
                client.user_changed(key, made.version)

        return lambda: asyncio.ensure_future(change())

    async def play(self) -> Report:
        scenario = self.scenario
        end_t = scenario.duration_s
        tasks = [
            self.loop.create_task(self._order(order))
            for order in sorted(scenario.orders, key=lambda o: o.create_t)
        ]
        tasks.append(self.loop.create_task(Faults(self).play(scenario.faults)))
        by_name = {d.name: d for u in scenario.users for d in u.devices}
        clients = [
            self.loop.create_task(client.run(by_name[name].start_t, end_t))
            for name, client in self.clients.items()
        ]
        clients += [
            self.loop.create_task(client.run(by_name[client.name].start_t, end_t))
            for client in self.misbehaving
        ]
        await asyncio.sleep(end_t)
        for task in tasks:
            task.cancel()
        self.world.outbox.close()
        # SIGTERM to every replica: every held poll answered at once, nothing left behind
        await asyncio.gather(*(self._stop(p) for p in self.replicas()))
        self.processes = [None] * len(self.processes)
        async with asyncio.timeout(DRAIN_S):
            results = await asyncio.gather(*clients, *self._tasks, return_exceptions=True)
        results += await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            # a client, an order's life or a fault that raised: a bug of the simulation or an
            # exception the product let out; either way the run says nothing
            if isinstance(result, Exception):
                raise result
        self.checker.finish(end_t, self.calls.calls)
        return Report(
            scenario.seed,
            scenario,
            self.checker.violations,
            self.checker.trace,
            self.checker.answers,
            self.checker.looks,
            len(self.calls.calls),
            self.loop.time(),
        )


def run_seed(
    seed: int, *, duration_s: float = DURATION_S, options: Options = DEFAULT_OPTIONS
) -> Report:
    """The run of one seed, from its plan to its report."""
    scenario = plan(seed, duration_s=duration_s)

    async def main(_: object) -> Report:
        return await Run(scenario, options).play()

    with _quiet(QUIET_LOGGERS):
        return run_virtual(main)


@contextmanager
def _quiet(names: Sequence[str]) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in names]
    was = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, was, strict=True):
            logger.disabled = disabled

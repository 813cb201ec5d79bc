"""A run's plan, drawn from its seed alone: the users and their devices, every order's life,
and the schedule of faults. The same seed is the same plan, on any machine."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from emulator.documents import LIFECYCLES

SERVICES = ("taxi", "eats", "grocery")
DURATION_S = 600.0
# how long each status lasts, seconds (a compressed day: orders begin and end within a run)
STATUS_S: dict[str, dict[str, tuple[float, float]]] = {
    "taxi": {
        "searching": (5, 40),
        "driving": (20, 90),
        "waiting": (5, 40),
        "transporting": (20, 120),
    },
    "eats": {"created": (5, 30), "cooking": (30, 120), "delivering": (30, 120)},
    "grocery": {"created": (5, 30), "assembling": (20, 90), "delivering": (30, 120)},
}
# a source's read replica lags less than the created grace (10 s): longer, and a just-created
# order vanishes whatever the BFF does (docs/protocol.md: A just-created order the source does
# not list yet)
MAX_LAG_S = 6.0


@dataclass(frozen=True)
class DevicePlan:
    name: str
    # > 0: waiting polls
    wait_ms: int
    # its legacy twin's period (the load baseline): 5 s on iOS, 10 s on Android
    legacy_period_s: float
    start_t: float


@dataclass(frozen=True)
class UserPlan:
    user_id: str
    devices: tuple[DevicePlan, ...]
    # a client that does not follow the protocol: names other users' orders, forces always
    misbehaving: bool = False


@dataclass(frozen=True)
class Step:
    """One thing that happens to an order at `t`: `advance` (the next status), `cancel`,
    `move`, `chat`, `performer`, or `change` by the user on `device` (a feature: comment,
    tips), made right after that device's next part fetch when `after_fetch`."""

    t: float
    kind: str
    device: str = ""
    feature: str = ""
    after_fetch: bool = False


@dataclass(frozen=True)
class OrderPlan:
    user_id: str
    service: str
    create_t: float
    # the device the user made it on (it knows the id at once); "" elsewhere (the web,
    # another app): its clients learn of it by polling
    device: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Fault:
    """`kind` on `target` from `start` to `end`:

    - store_down: order_tags answers 503 (every call fails at once)
    - store_paused: Redis stopped: every call waits out its deadline
    - redis_outage: Redis gone: the tag store down and every pub/sub connection lost; back
      empty when `empty`
    - flush: all tag store data gone at `start` (FLUSHALL)
    - pubsub_lost: the pub/sub connection of replica `target` (or all: "") lost at `start`
    - message_loss: each published message lost with probability `value`
    - bump_loss: writers die between their data and their tags with probability `value`: the
      write is sent from their outbox when they are back (lost with Options.lossy_writers)
    - store_down, store_paused and redis_outage refuse the writers' tag writes: they retry
      them until they land (drop them with Options.lossy_writers)
    - source_down, source_slow (answers after `value` s), source_lagging (a replica `value`
      s behind): the order source of `target`
    - upstream_down, upstream_slow (`value` s): a part upstream
    - replica_restart: replica `target` stops (SIGTERM) and starts again after `value` s;
      half the time the others follow in turn, each once the last is back (a rolling deploy)
    """

    kind: str
    start: float
    end: float
    target: str = ""
    value: float = 0.0
    empty: bool = False

    def describe(self) -> str:
        what = f"{self.kind}({self.target})" if self.target else self.kind
        extra = f" value={self.value:g}" if self.value else ""
        extra += " empty" if self.empty else ""
        return f"{self.start:7.2f}-{self.end:7.2f}  {what}{extra}"


@dataclass
class Scenario:
    seed: int
    duration_s: float
    replicas: int
    users: list[UserPlan]
    orders: list[OrderPlan]
    faults: list[Fault] = field(default_factory=list)

    def describe(self) -> str:
        lines = [
            f"seed {self.seed}: {self.duration_s:g} s, {self.replicas} replica(s), "
            f"{len(self.users)} users, {len(self.orders)} orders"
        ]
        for user in self.users:
            devices = ", ".join(
                f"{d.name} ({'wait' if d.wait_ms else 'plain'}, legacy {d.legacy_period_s:g} s, "
                f"from {d.start_t:.1f} s)"
                for d in user.devices
            )
            flag = " misbehaving" if user.misbehaving else ""
            lines.append(f"  user {user.user_id}{flag}: {devices}")
        for order in self.orders:
            where = f"on {order.device}" if order.device else "elsewhere"
            steps = " ".join(f"{s.kind}@{s.t:.0f}" for s in order.steps)
            lines.append(
                f"  order of {order.user_id}: {order.service} at {order.create_t:.1f} s "
                f"{where}: {steps}"
            )
        lines.append("  faults:")
        lines.extend(f"    {fault.describe()}" for fault in self.faults)
        return "\n".join(lines)


def plan(seed: int, *, duration_s: float = DURATION_S) -> Scenario:
    rng = random.Random(f"simulation:{seed}")
    # one draw, as when a run had one or two: a seed's users, orders and faults stay its own
    fleet = rng.random()
    replicas = 3 if fleet < 0.2 else 2 if fleet < 0.45 else 1
    users: list[UserPlan] = []
    for index in range(rng.randint(3, 5)):
        user_id = f"u{index}"
        devices = tuple(
            DevicePlan(
                f"{user_id}d{number}",
                25_000 if rng.random() < 0.75 else 0,
                5.0 if rng.random() < 0.5 else 10.0,
                rng.uniform(1, 20),
            )
            for number in range(1 if rng.random() < 0.7 else 2)
        )
        users.append(UserPlan(user_id, devices))
    for index in range(1 if rng.random() < 0.6 else 0):
        user_id = f"m{index}"
        users.append(
            UserPlan(user_id, (DevicePlan(f"{user_id}d0", 0, 5.0, rng.uniform(5, 30)),), True)
        )
    orders: list[OrderPlan] = []
    for user in users:
        if user.misbehaving:
            continue
        times = []
        if rng.random() < 0.4:
            # an order already going when the user opens the app
            times.append(rng.uniform(0, 1))
        t = rng.expovariate(1 / 150)
        while t < duration_s - 30:
            times.append(t)
            t += rng.expovariate(1 / 150)
        for create_t in times:
            service = rng.choices(SERVICES, weights=(2, 1, 1))[0]
            on_device = create_t > 1 and rng.random() < 0.7
            device = rng.choice(user.devices).name if on_device else ""
            orders.append(
                OrderPlan(
                    user.user_id, service, create_t, device, _life(rng, user, service, create_t)
                )
            )
    return Scenario(seed, duration_s, replicas, users, orders, _faults(rng, replicas, duration_s))


def _life(rng: random.Random, user: UserPlan, service: str, create_t: float) -> tuple[Step, ...]:
    steps: list[Step] = []
    t = create_t
    lifecycle = LIFECYCLES[service]
    for status in lifecycle[:-1]:
        low, high = STATUS_S[service][status]
        ends = t + rng.uniform(low, high)
        if service == "taxi" and status in ("driving", "transporting"):
            moment = t + rng.uniform(5, 30)
            while moment < ends:
                steps.append(Step(moment, "move"))
                moment += rng.uniform(10, 40)
        t = ends
        steps.append(Step(t, "advance"))
    end = t
    if rng.random() < 0.15:
        end = rng.uniform(create_t + 2, end)
        steps = [step for step in steps if step.t < end]
        steps.append(Step(end, "cancel"))
    if service == "taxi":
        moment = create_t + rng.uniform(10, 120)
        while moment < end:
            steps.append(Step(moment, "chat"))
            moment += rng.uniform(30, 150)
        steps.append(Step(rng.uniform(create_t, end), "performer"))
    for _ in range(rng.choice((0, 1, 1, 2))):
        moment = rng.uniform(create_t + 3, max(create_t + 4, end - 5))
        if moment < end:
            steps.append(
                Step(
                    moment,
                    "change",
                    rng.choice(user.devices).name,
                    rng.choice(("comment", "tips")),
                    rng.random() < 0.5,
                )
            )
    return tuple(sorted(steps, key=lambda step: step.t))


FAULT_KINDS = (
    ("store_down", 2),
    ("store_paused", 1),
    ("redis_outage", 3),
    ("flush", 1),
    ("pubsub_lost", 2),
    ("message_loss", 2),
    ("bump_loss", 1),
    ("source_down", 2),
    ("source_slow", 1),
    ("source_lagging", 3),
    ("upstream_down", 1),
    ("upstream_slow", 1),
    ("replica_restart", 1),
)


def _faults(rng: random.Random, replicas: int, duration_s: float) -> list[Fault]:
    kinds = [kind for kind, _ in FAULT_KINDS]
    weights = [weight for _, weight in FAULT_KINDS]
    faults: list[Fault] = []
    for _ in range(rng.randint(2, 6)):
        kind = rng.choices(kinds, weights)[0]
        start = rng.uniform(40, duration_s - 60)
        if kind == "store_down":
            faults.append(Fault(kind, start, start + rng.uniform(3, 40)))
        elif kind == "store_paused":
            faults.append(Fault(kind, start, start + rng.uniform(3, 25)))
        elif kind == "redis_outage":
            empty = rng.random() < 0.6
            faults.append(Fault(kind, start, start + rng.uniform(1, 20), empty=empty))
        elif kind == "flush":
            faults.append(Fault(kind, start, start))
        elif kind == "pubsub_lost":
            target = f"r{rng.randrange(replicas)}" if rng.random() < 0.5 else ""
            faults.append(Fault(kind, start, start, target))
        elif kind == "message_loss":
            value = rng.choice((0.3, 0.7, 1.0))
            faults.append(Fault(kind, start, start + rng.uniform(10, 90), value=value))
        elif kind == "bump_loss":
            value = rng.choice((0.05, 0.2))
            faults.append(Fault(kind, start, start + rng.uniform(20, 120), value=value))
        elif kind.startswith("source_"):
            service = rng.choices(SERVICES, weights=(2, 1, 1))[0]
            if kind == "source_slow":
                value = rng.choice((0.1, 0.4))
            elif kind == "source_lagging":
                value = rng.uniform(0.5, MAX_LAG_S)
            else:
                value = 0.0
            faults.append(Fault(kind, start, start + rng.uniform(5, 90), service, value))
        elif kind.startswith("upstream_"):
            target = rng.choice(("order_core", "order_settings", "orderperformerinfo", "eats_full"))
            value = rng.choice((0.3, 1.5)) if kind == "upstream_slow" else 0.0
            faults.append(Fault(kind, start, start + rng.uniform(5, 60), target, value))
        elif replicas > 1:
            target = f"r{rng.randrange(replicas)}"
            faults.append(Fault(kind, start, start, target, rng.uniform(0.5, 3)))
            if rng.random() < 0.5:
                # a rolling deploy: the others after it, each once the last is back
                at = start
                for index in range(1, replicas):
                    at += faults[-1].value + rng.uniform(2, 10)
                    following = f"r{(int(target[1:]) + index) % replicas}"
                    faults.append(Fault(kind, at, at, following, rng.uniform(0.5, 3)))
    return sorted(faults, key=lambda fault: fault.start)

"""The checker's state, shared by the checks of each kind (devtools/simulation/checks.py): the
world, the tag store, the clients, and the records the checks keep as the run goes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from devtools.simulation.scenario import Scenario
from devtools.simulation.store import SimTagStore
from devtools.simulation.timeline import Timeline
from devtools.simulation.trace import ClientInfo, Trace, Violation
from devtools.simulation.world import World
from shared.policy import PollingPolicy
from shared.wire import OrderKey


class CheckerBase:
    """What every kind of check reads and records."""

    def __init__(
        self,
        scenario: Scenario,
        world: World,
        store: SimTagStore,
        policy: PollingPolicy,
        clients: Sequence[ClientInfo],
        *,
        watch_cache: bool = False,
    ) -> None:
        self.scenario = scenario
        # polls held from their last look (the watch cache) see a change whose wake-up was
        # lost on a live connection at their next full look, not at the next poll
        self.watch_cache = watch_cache
        self.world = world
        self.store = store
        self.policy = policy
        self.timeline = Timeline(scenario.faults)
        self.clients = {client.name: client for client in clients}
        self.violations: list[Violation] = []
        self.trace = Trace()
        # client → its records: (t, status index) and (t, version) seen per order, the orders
        # it holds after each answer, and per answer (when, its promise, when its poll went)
        self.saw: dict[tuple[str, OrderKey], list[tuple[float, int]]] = {}
        self.versions: dict[tuple[str, OrderKey], list[tuple[float, int]]] = {}
        self.holds: dict[str, list[tuple[float, frozenset[OrderKey]]]] = {}
        self.promises: dict[str, list[tuple[float, float, float]]] = {}
        # (order, user) → when a look of that user's forced the order
        self.forces: dict[tuple[OrderKey, str], list[float]] = {}
        self._owners: dict[str, str] = {}
        # client → when it sent each poll; user → when each look of its began
        self.polls: dict[str, list[float]] = {}
        self.look_times: dict[str, list[float]] = {}
        self.answers = 0
        self.looks = 0

    def violation(self, t: float, invariant: str, message: str, user_id: str = "") -> None:
        self.violations.append(Violation(t, invariant, message, user_id))
        self.trace.add(t, user_id, f"VIOLATION {invariant}: {message}")

    def note(self, t: float, user_id: str, text: str | Callable[[], str]) -> None:
        self.trace.add(t, user_id, text)

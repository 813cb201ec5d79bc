"""Who watches the engine's looks besides its metrics: a port passed at construction, as the
metrics are. The services pass none and `Unobserved` does nothing; the simulation
(devtools/simulation) checks its invariants look by look through it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from services.bff.poll import Poll

if TYPE_CHECKING:
    from services.bff.engine import LookResult


class LookObserver(Protocol):
    def look_started(self, poll: Poll) -> object:
        """A look of this poll begins: what the observer needs of this moment, handed back
        with the look's result."""
        ...

    def looked(self, poll: Poll, result: LookResult, started: object) -> None:
        """The look ended with `result`; `started` is what look_started returned for it."""
        ...


class Unobserved:
    """No one watches."""

    def look_started(self, poll: Poll) -> object:
        return None

    def looked(self, poll: Poll, result: LookResult, started: object) -> None:
        return None


UNOBSERVED = Unobserved()

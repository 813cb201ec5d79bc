"""A tag writer's outbox told to a test awaiting it empty: a test double around the outbox's
pending writes (the writer takes the outbox at construction, and forgets a key's write there
once it landed or was given up), so a test awaits "every write landed" as an event, never a
sleep."""

from __future__ import annotations

import asyncio

from shared.tag_outbox import Key, Outbox, Pending


class _Told(dict[Key, Pending]):
    """The outbox's pending writes, telling `emptied` when the last one goes."""

    def __init__(self, pending: dict[Key, Pending]) -> None:
        super().__init__(pending)
        self.emptied = asyncio.Event()

    def __delitem__(self, key: Key) -> None:
        super().__delitem__(key)
        if not self:
            self.emptied.set()


async def drained(outbox: Outbox, timeout_s: float) -> None:
    """Until nothing is pending in `outbox`: every write its writer was given landed, or was
    given up. The outbox is told from the first call on (no await in between)."""
    pending = outbox.pending
    if not isinstance(pending, _Told):
        pending = outbox.pending = _Told(pending)
    async with asyncio.timeout(timeout_s):
        while pending:
            pending.emptied.clear()
            await pending.emptied.wait()

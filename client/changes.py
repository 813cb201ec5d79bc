"""User changes (docs/protocol.md: Feature data and user changes): a change is sent to its
feature service, shown at once and locked, and the order polled with `force` until a part
shows it. Versioned features: a conflict catches up to the current version, then retries
once. Last-write-wins features: an idempotency key, retried once past the deadline."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from client.model import LAST_WRITE_WINS, ClientOptions, Order, PendingChange
from client.transport import Transport

# (service, orderid, feature, "seen" | "failed")
ChangeResult = tuple[str, str, str, str]


class UserChanges:
    def __init__(
        self,
        transport: Transport,
        features_url: str | None,
        options: ClientOptions,
        on_change: Callable[[Order], None],
    ) -> None:
        self.transport = transport
        # the feature services' user change endpoints: {features_url}/{service}/{orderid}/{feature}
        self.features_url = features_url.rstrip("/") if features_url else None
        self.options = options
        # an order's lock or shown value changed: the view is published again
        self.on_change = on_change
        # in the order they were decided
        self.results: list[ChangeResult] = []

    async def change(self, order: Order, feature: str, value: Any) -> bool:
        if self.features_url is None:
            return False
        pending = PendingChange(feature, value, time.monotonic() + self.options.change_deadline_s)
        if feature in LAST_WRITE_WINS:
            pending.idempotency_key = uuid.uuid4().hex
        order.pending_change = pending
        if not await self._send(order, pending):
            return False
        self.on_change(order)
        return True

    def changed_elsewhere(self, order: Order, version: int) -> None:
        deadline = time.monotonic() + self.options.change_deadline_s
        order.pending_change = PendingChange(None, None, deadline, version=version)
        self.on_change(order)

    async def _send(self, order: Order, pending: PendingChange) -> bool:
        body: dict[str, Any] = {"value": pending.value}
        if pending.idempotency_key is not None:
            body["idempotency_key"] = pending.idempotency_key
            body["requested_at_ms"] = int(time.time() * 1000)
        else:
            body["version"] = order.seen_version
        url = f"{self.features_url}/{order.service}/{order.orderid}/{pending.feature}"
        reply = await self.transport.call(url, body)
        answer = reply.body
        if reply.status == 200 and answer is not None:
            pending.version, pending.conflict = answer["version"], False
            return True
        conflict = (
            reply.status == 409 and answer is not None and answer.get("code") == "version_conflict"
        )
        if conflict and answer is not None and not pending.retried:
            # another device changed it first: catch up to that version, then retry once
            pending.version, pending.conflict = answer["current_version"], True
            return True
        self._done(order, "failed")
        return False

    async def follow(self, orders: Iterable[Order]) -> None:
        """After each poll: a change is seen (unlock), its conflict caught up (retry once), or
        its deadline passed (last-write-wins: retry once; versioned: failed)."""
        now = time.monotonic()
        for order in list(orders):
            pending = order.pending_change
            if pending is None:
                continue
            if pending.conflict:
                if pending.version is not None and order.seen_version >= pending.version:
                    pending.retried = True
                    pending.deadline = now + self.options.change_deadline_s
                    await self._send(order, pending)
                elif now >= pending.deadline:
                    self._done(order, "failed")
                continue
            if self._seen(order, pending):
                self._done(order, "seen")
            elif now >= pending.deadline:
                if pending.idempotency_key is not None and not pending.retried:
                    # the same key: if the first one did land, this changes nothing twice
                    pending.retried = True
                    pending.deadline = now + self.options.change_deadline_s
                    await self._send(order, pending)
                else:
                    self._done(order, "failed")

    @staticmethod
    def _seen(order: Order, pending: PendingChange) -> bool:
        field_name = pending.field
        if pending.idempotency_key is not None and field_name is not None:
            # last-write-wins: the requested value itself is what shows it
            return any(
                part.arrived and part.fields.get(field_name) == pending.value
                for part in order.parts.values()
            )
        return pending.version is not None and order.seen_version >= pending.version

    def _done(self, order: Order, outcome: str) -> None:
        """Seen or failed: the lock is released and force stops."""
        pending = order.pending_change
        if pending is not None and pending.feature is not None:
            self.results.append((order.service, order.orderid, pending.feature, outcome))
        order.pending_change = None
        self.on_change(order)

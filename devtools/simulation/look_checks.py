"""The checks made on each look (`finished`, `force`, `lost_redis`, `watch_cache`;
devtools/simulation/checks.py)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from devtools.simulation.bounds import FORCE_PER_MINUTE, LIST_MAX_AGE_S
from devtools.simulation.check_base import CheckerBase
from devtools.simulation.store import MESSAGE_DELAY_S, MESSAGE_SPREAD_S
from devtools.simulation.vloop import WALL_EPOCH_S
from services.bff.engine import LookResult
from services.bff.known_orders import ParsedKnownOrder
from shared.answer import ActualOrder
from shared.protocol.tags import valid_tag
from shared.wire import OrderKey


class LookChecks(CheckerBase):
    """Look by look: what each look answered, and what a held poll did instead of a look."""

    # --- look by look ------------------------------------------------------------------------

    def look(
        self,
        process: str,
        user_id: str,
        known: Sequence[ParsedKnownOrder],
        started: float,
        result: LookResult,
        before: dict[OrderKey, Any],
    ) -> None:
        self.looks += 1
        self.look_times.setdefault(user_id, []).append(started)
        now = self.world.now()
        for order in result.orders:
            if not isinstance(order, ActualOrder):
                continue
            truth = self.world.orders.get(order.key)
            if truth is None or truth.finished_t is None or started <= truth.finished_t:
                continue
            lag = self.timeline.lag_at(order.service, started - 1, now)
            if lag and started - lag < truth.finished_t + 0.1:
                continue
            finish = next(
                (c for c in self.world.status_changes if c.key == order.key and c.finished), None
            )
            bumped = finish.list_bump_t if finish is not None else None
            if bumped is not None and started > bumped:
                self.violation(
                    now,
                    "finished",
                    f"{order.key} finished at {truth.finished_t:.3f}, its list bump landed at "
                    f"{bumped:.3f}, and a look of {user_id} begun at {started:.3f} answered it",
                    user_id,
                )
            elif started > truth.finished_t + LIST_MAX_AGE_S + 2:
                self.violation(
                    now,
                    "finished",
                    f"{order.key} finished at {truth.finished_t:.3f} and is still answered "
                    f"actual to {user_id} {started - truth.finished_t:.1f} s later",
                    user_id,
                )
        self._force(user_id, known, started, result, before)

    def looked_again(self, process: str, user_id: str, lost: str) -> None:
        self.violation(
            self.world.now(),
            "lost_redis",
            f"a held poll of {user_id} on {process} looked again (asking its sources) though "
            f"{process} knew {lost} was lost: it must answer with its last look",
            user_id,
        )

    def kept_look_missed(
        self,
        process: str,
        user_id: str,
        channels: Sequence[str],
        since_s: float,
        held_s: float,
        news: str,
    ) -> None:
        watched = set(channels)
        if any(t >= since_s and c in watched for t, c in self.store.lost_messages):
            return
        on_its_way = held_s - MESSAGE_DELAY_S - MESSAGE_SPREAD_S
        if any(self.store.last_published.get(c, -1.0) >= on_its_way for c in channels):
            # written while the poll was held, or just before with its message still on its
            # way: that message rings the poll
            return
        self.violation(
            self.world.now(),
            "watch_cache",
            f"a poll of {user_id} on {process} was held from its last look, but a fresh look "
            f"had news: {news}",
            user_id,
        )

    def look_started(self, known: Sequence[ParsedKnownOrder]) -> dict[OrderKey, Any]:
        return {
            k.key: (self.store.content(k.key), self.store.owner(k.key))
            for k in known
            if k.order.force
        }

    def _force(
        self,
        user_id: str,
        known: Sequence[ParsedKnownOrder],
        started: float,
        result: LookResult,
        before: dict[OrderKey, Any],
    ) -> None:
        answered = {order.key: order for order in result.orders}
        for k in known:
            if not k.order.force:
                continue
            times = self.forces.setdefault((k.key, user_id), [])
            times.append(started)
            truth = self.world.orders.get(k.key)
            if truth is None or truth.user_id != user_id or result.degraded:
                continue
            recent = len(times) - bisect.bisect_right(times, started - 60.0)
            if recent > FORCE_PER_MINUTE:
                continue
            order = answered.get(k.key)
            stored, owner = before.get(k.key, (None, None))
            if not isinstance(order, ActualOrder) or stored is None:
                continue
            if owner != user_id:
                # tags naming no owner when the look read them (made again by a writer's bump
                # after a flush, the owner named by this look's creation): order_tags cannot
                # tell the owner's force from another user's, and honours neither
                continue
            if self.store.content(k.key) != stored:
                continue  # written during the look: which one it read is not known
            served = self.policy.services[k.key.service]
            now_ms = int((WALL_EPOCH_S + started) * 1000)
            for rule in served.rules_by_priority:
                if not rule.tag_defined or rule.static or rule.part_name not in stored:
                    continue
                tag = valid_tag(k.order.tags.get(rule.part_name), served.policy_version, now_ms)
                if tag is not None and tag.content == stored[rule.part_name]:
                    continue
                if rule.part_name not in order.need_request:
                    self.violation(
                        self.world.now(),
                        "force",
                        f"{user_id} forced its order {k.key} (its force #{recent} in a "
                        f"minute) and {rule.part_name} changed, but it is not needed: "
                        f"need_request={order.need_request}",
                        user_id,
                    )
                    return

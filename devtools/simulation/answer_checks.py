"""The checks made on each answer as the server gives it (`crossing`, `vanished`, `order`,
`deadline`; devtools/simulation/checks.py) and on each held poll's channels and wake-ups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from devtools.simulation.bff import PollReply
from devtools.simulation.bounds import LIST_MAX_AGE_S, ONE_LOOK_S, SERVICES
from devtools.simulation.check_base import CheckerBase
from devtools.simulation.documents import stamps as stamps_of
from devtools.simulation.trace import describe_orders, shown
from shared.answer import ActualOrder
from shared.policy import PartEndpoint
from shared.protocol.tags import decode_tag
from shared.redis import list_channel, tags_channel
from shared.wire import OrderKey


class AnswerChecks(CheckerBase):
    """Answer by answer: what each answer holds, and whose channels a held poll listens on."""

    # --- answer by answer ------------------------------------------------------------------

    def answered(self, process: str, user_id: str, reply: PollReply) -> None:
        self.answers += 1
        kind = (
            "launch" if reply.launch else f"poll wait={reply.wait_ms}" if reply.wait_ms else "poll"
        )
        if reply.status != 200:
            self.note(reply.answered, user_id, f"{process} {kind} -> {reply.status}")
            return

        def text() -> str:
            cause = f" {reply.cause.value}" if reply.cause is not None else ""
            sent = " ".join(f"{k['orderid']}{'!' if k.get('force') else ''}" for k in reply.known)
            return (
                f"{process} {kind} [{sent}] ({reply.started:.3f}) -> "
                f"{describe_orders(reply.orders)} {reply.interval_ms} ms{cause}"
                f"{' degraded' if reply.degraded else ''}"
            )

        self.note(reply.answered, user_id, text)
        self._deadline(process, user_id, reply)
        sent_by_key = {OrderKey(k["service"], k["orderid"]): k for k in reply.known}
        answered: set[OrderKey] = set()
        keys: list[tuple[str, str, str]] = []
        for order in reply.orders:
            if order.key in answered:
                self.violation(reply.answered, "crossing", f"{order.key} answered twice", user_id)
            answered.add(order.key)
            truth = self.world.orders.get(order.key)
            if isinstance(order, ActualOrder):
                if truth is None or truth.user_id != user_id:
                    owner = truth.user_id if truth is not None else "nobody"
                    self.violation(
                        reply.answered,
                        "crossing",
                        f"{order.key} of {owner} answered actual to {user_id}",
                        user_id,
                    )
                    continue
                keys.append((truth.created_at, order.service, order.orderid))
                echoed = sent_by_key.get(order.key, {}).get("version")
                if isinstance(echoed, int) and order.version is not None and order.version < echoed:
                    self.violation(
                        reply.answered,
                        "backwards",
                        f"{order.key} answered actual at version {order.version}, its client "
                        f"echoed {echoed}",
                        user_id,
                    )
                continue
            known = sent_by_key.get(order.key)
            if known is None:
                self.violation(
                    reply.answered,
                    "crossing",
                    f"stale {order.key} the client did not send",
                    user_id,
                )
                continue
            echoed = {
                k: v
                for k, v in known.items()
                if k
                not in ("orderid", "service", "status", "tags", "force", "created_at", "version")
            }
            if (
                order.status != known.get("status", "")
                or order.version != known.get("version")
                or order.tags != known.get("tags", {})
                or order.echo != echoed
            ):
                self.violation(
                    reply.answered,
                    "crossing",
                    f"stale {order.key} is not what the client sent: {order}",
                    user_id,
                )
            created_at = known.get("created_at")
            if isinstance(created_at, str):
                keys.append((created_at, order.service, order.orderid))
        if keys != sorted(keys):
            self.violation(
                reply.answered,
                "order",
                f"orders not in canonical order: {[k[2] for k in keys]}",
                user_id,
            )
        for key in sent_by_key:
            if key not in answered:
                self._absent(user_id, key, reply)

    def _deadline(self, process: str, user_id: str, reply: PollReply) -> None:
        took = reply.answered - reply.started
        limit = ONE_LOOK_S
        if reply.wait_ms:
            limit += reply.wait_ms / 1000 * 17 / 16 + ONE_LOOK_S + 1.0
        if took > limit:
            self.violation(
                reply.answered,
                "deadline",
                f"{process} answered a poll (wait_ms {reply.wait_ms}) in {took:.3f} s, "
                f"more than {limit:.3f} s",
                user_id,
            )

    def _absent(self, user_id: str, key: OrderKey, reply: PollReply) -> None:
        """A known order left out: fine when it is not the user's or not active throughout."""
        truth = self.world.orders.get(key)
        if truth is None or truth.user_id != user_id:
            return
        if not (truth.active_at(reply.started) and truth.active_at(reply.answered)):
            return
        unwritten = truth.tags_written_t is None or truth.created_bump_t is None
        if unwritten and reply.started < truth.created_t + LIST_MAX_AGE_S + 2:
            # a creation whose tags never landed: a kept answer from before it stands for the
            # source up to list_max_age; with no tags there is no grace
            return
        lag = self.timeline.lag_at(key.service, reply.started - 1, reply.answered)
        if lag and reply.started < truth.created_t + lag + 0.1:
            unknowable = truth.tags_written_t is None or bool(
                self.timeline.store_spans(reply.started - 1, reply.answered)
            )
            flushed = any(
                span.fault.kind in ("flush", "redis_outage") and span.start >= truth.created_t
                for span in self.timeline.store_spans(truth.created_t, reply.answered)
            )
            if unknowable or flushed:
                return
        self.violation(
            reply.answered,
            "vanished",
            f"{key} (created {truth.created_t:.3f}, tags {truth.tags_written_t}, list bump "
            f"{truth.created_bump_t}) is active but absent from the answer to {user_id}",
            user_id,
        )

    def part_answered(
        self, user_id: str, endpoint: PartEndpoint, parts: list[dict[str, Any]]
    ) -> None:
        self.note(
            self.world.now(),
            user_id,
            lambda: (
                f"part {endpoint.rule.part_name} -> "
                + " ".join(
                    f"{p['orderid']}:{shown(p.get('version', p.get('error', '-')))}" for p in parts
                )
            ),
        )
        for part in parts:
            if "error" in part:
                continue
            key = OrderKey(endpoint.service, str(part["orderid"]))
            if "unchanged" not in part and not self._part_data(user_id, endpoint, key, part):
                continue
            truth = self.world.orders.get(key)
            if truth is None or truth.user_id != user_id:
                self.violation(
                    self.world.now(),
                    "crossing",
                    f"part {endpoint.rule.part_name} of {part['orderid']} answered to {user_id}",
                    user_id,
                )

    def _part_data(
        self, user_id: str, endpoint: PartEndpoint, key: OrderKey, part: dict[str, Any]
    ) -> bool:
        """The data of a part answered with fields, by the stamps its upstream put in it:
        fetched for this user (`crossing`), and no older than the content tag its tag carries
        (`behind_tag`): at least the order's revision when that content tag was first
        written. False when it broke either."""
        name = endpoint.rule.part_name
        stamps = stamps_of(part)
        # every part of the policy's current endpoints carries one: a part without one is
        # the simulation's own bug, and would leave these checks blind
        assert stamps, f"part {name} of {key} answered with no stamp: {part}"
        for stamp in stamps:
            if stamp.user_id != user_id:
                self.violation(
                    self.world.now(),
                    "crossing",
                    f"part {name} of {key.orderid} answered to {user_id} carries data fetched "
                    f"for {stamp.user_id}",
                    user_id,
                )
                return False
        tag = decode_tag(str(part["tag"]))
        content = tag.content if tag is not None else None
        truth = self.world.orders.get(key)
        if content is None or truth is None:
            # no content tag (the tag cache down, or none stored): it claims nothing
            return True
        written = self.store.content_written.get((key, name, content))
        revision = min(stamp.revision for stamp in stamps)
        if written is None or revision < truth.revision_at(written):
            at = (
                f"first written at {written:.3f}, the order then at revision "
                f"{truth.revision_at(written)}"
                if written is not None
                else "never written for it"
            )
            self.violation(
                self.world.now(),
                "behind_tag",
                f"part {name} of {key.orderid} answered to {user_id} with data of revision "
                f"{revision} under content tag {content} ({at})",
                user_id,
            )
            return False
        return True

    # --- wake-ups ----------------------------------------------------------------------------

    def _channel_owner(self, channel: str) -> str | None:
        if channel not in self._owners:
            # an order made since the last look: every channel named afresh
            self._owners = {
                tags_channel(key.service, key.orderid): order.user_id
                for key, order in self.world.orders.items()
            }
            self._owners.update(
                (list_channel(service, client.user_id), client.user_id)
                for client in self.clients.values()
                for service in SERVICES
            )
        return self._owners.get(channel)

    def held(self, user_id: str, channels: Sequence[str]) -> None:
        for channel in channels:
            if self._channel_owner(channel) != user_id:
                self.violation(
                    self.world.now(),
                    "crossing",
                    f"a poll of {user_id} is held listening on {channel}",
                    user_id,
                )

    def rung(self, user_id: str, channel: str, *, held: bool) -> None:
        if held and self._channel_owner(channel) != user_id:
            self.violation(
                self.world.now(),
                "crossing",
                f"a held poll of {user_id} was woken by a write on {channel}",
                user_id,
            )

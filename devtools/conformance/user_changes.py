"""Scenarios of the user's own changes: a versioned one that meets another device's change
first, and a last-write-wins one that is not seen within its deadline."""

from __future__ import annotations

import itertools
import time

from devtools.conformance.kit import PATIENCE_S, Kit, caught_up, polls_after
from devtools.conformance.recording import Exchange

# the poll answers' and the clock's slack around a deadline
DEADLINE_SLACK_S = 0.5

# the taxi parts' own upstreams that show a user's tip and the version it lands at
UNSEEN_TARGETS = ("part:order_settings", "part:order_core")


async def versioned_conflict(kit: Kit) -> list[str]:
    """A user change after another device changed the same field: a version conflict, caught
    up and retried once; then `force` until a part shows the change, and no longer."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    # another device first: the app's version is now one behind
    path = f"/emulator/v1/features/taxi/{orderid}/comment"
    async with kit.session.post(
        f"{kit.emulator_url}{path}",
        json={"value": "from another device", "version": 1},
        headers={"X-Yandex-UID": kit.user},
    ) as r:
        if r.status != 200:
            raise RuntimeError(f"the other device's change: {r.status} {await r.text()}")
    started = time.monotonic()
    await kit.client.change("taxi", orderid, "comment", "from the app")

    def seen_then_polled(ex: list[Exchange]) -> bool:
        changed = [e for e in ex if e.kind == "feature" and e.at > started and e.status == 200]
        if not changed:
            return False
        version = (changed[-1].answer or {}).get("version", 0)
        shown = [
            e
            for e in ex
            if e.kind == "part"
            and e.at > changed[-1].at
            and any(o.get("version", 0) >= version for o in (e.answer or {}).get("orders", []))
        ]
        return bool(shown) and len(polls_after(ex, shown[0].at)) >= 1

    await kit.until("see its change and poll without force", seen_then_polled)
    tries = [e for e in kit.exchanges() if e.kind == "feature" and e.at > started]
    statuses = [e.status for e in tries]
    if statuses != [409, 200]:
        return [f"the change was sent {len(tries)} times ({statuses}); a conflict retries once"]
    return []


def _forced(exchange: Exchange, orderid: str) -> bool:
    return any(
        k.get("orderid") == orderid and k.get("force")
        for k in exchange.request.get("known_orders", [])
    )


async def last_write_wins_deadline(kit: Kit) -> list[str]:
    """A tip (last-write-wins) that no part shows (its part's upstream fails): past the
    client's deadline it is sent once more with the same idempotency key; past the second
    deadline the lock is released and `force` stops."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    deadline_s = kit.client.change_deadline_s
    patience_s = deadline_s + PATIENCE_S
    started = time.monotonic()

    def tips(ex: list[Exchange]) -> list[Exchange]:
        return [
            e for e in ex if e.kind == "feature" and e.path.endswith("/tips") and e.at > started
        ]

    # no part can show the tip: neither its own (rarely_changed, the settings service) nor
    # fast_info, whose `version` would say the change is seen (the order core)
    for target in UNSEEN_TARGETS:
        await kit.fault(target, "error500")
    try:
        await kit.client.change("taxi", orderid, "tips", 50)
        await kit.until(
            "send the tip again past its deadline", lambda ex: len(tips(ex)) >= 2, patience_s
        )
        second = tips(kit.exchanges())[1]
        given_up = second.at + deadline_s + DEADLINE_SLACK_S
        await kit.until(
            "poll on past the second deadline",
            lambda ex: len(polls_after(ex, given_up)) >= 2,
            patience_s,
        )
    finally:
        for target in UNSEEN_TARGETS:
            await kit.fault(target, "ok")
    sent = tips(kit.exchanges())
    problems = []
    if len(sent) != 2:
        problems.append(f"the tip was sent {len(sent)} times; past its deadline, once more")
    keys = {e.request.get("idempotency_key") for e in sent}
    if len(keys) != 1 or None in keys:
        problems.append("the tip's second request did not carry the first one's idempotency key")
    if sent[1].at - sent[0].at + DEADLINE_SLACK_S < deadline_s:
        problems.append(
            f"the tip was sent again {sent[1].at - sent[0].at:.1f} s after the first, before "
            f"the {deadline_s:.0f} s deadline"
        )
    polls = [e for e in kit.exchanges() if e.kind == "poll" and e.at > second.at]
    # a poll with force that went out after an answer that came past the second deadline: the
    # client had its chance to give up and did not
    late = [
        after
        for before, after in itertools.pairwise(polls)
        if before.answered > given_up and _forced(after, orderid)
    ]
    if late:
        problems.append(f"force sent {len(late)} times after the change's second deadline passed")
    return problems

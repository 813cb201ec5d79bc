"""Scenarios of things going wrong around the client, or changing under it: a source down, the
tag store down, the server shedding, the app restarted, the policy deployed anew."""

from __future__ import annotations

import time

from demo.tag_cache_switch import TagCacheSwitch
from devtools.conformance.kit import PATIENCE_S, Kit, caught_up, fetched, polls_after
from devtools.conformance.recording import Exchange
from shared.policy import load_policy

# the polls a client makes while the tag store is down, before the kit brings it back
POLLS_WHILE_DOWN = 3
# a launch that follows the poll telling another policy version within this is "at once"
AT_ONCE_S = 1.0


async def source_down(kit: Kit) -> list[str]:
    """A source down: its order comes back stale and the client keeps it, with its echo."""
    orderid = await kit.create_order("eats")
    await caught_up(kit, orderid, "full_info")
    await kit.fault("source:eats", "down")
    try:
        # the list changes while its source is down: the source is asked, and fails
        await kit.advance(orderid, "eats")
        went_stale = time.monotonic()

        def stale_then_polled(ex: list[Exchange]) -> bool:
            stale = [
                e
                for e in ex
                if e.kind == "poll"
                and e.at > went_stale
                and e.answer is not None
                and any(o.get("update_status") == "stale" for o in e.answer.get("orders", []))
            ]
            return bool(stale) and len(polls_after(ex, stale[0].at)) >= 1

        await kit.until("poll again after a stale answer", stale_then_polled)
    finally:
        await kit.fault("source:eats", "ok")
    return []


def answered_degraded(exchange: Exchange) -> bool:
    """An answer given while the tag store is down: a waiting poll is told `unavailable`; a
    plain one cannot tell, so any answer counts. A 204 is an answer too: a client that sends
    its answer_tag back is told "nothing new" that way, degraded or not."""
    if exchange.status not in (200, 204):
        return False
    waited = exchange.request.get("wait_ms")
    return not waited or exchange.answer_headers.get("X-Mlutp-Wait") == "unavailable"


async def tag_cache_down(kit: Kit) -> list[str]:
    """The tag store down: every poll is answered at once, degraded, and the client keeps to
    the interval it is given (no tight loop, whether it waits or not), then waits again once
    the store is back."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    switch = TagCacheSwitch.create(kit.stack.env["REDIS_URL"])
    try:
        await switch.set(down=True)
        down = time.monotonic()
        # the held poll's wait ends first (nothing wakes it), then each degraded poll comes
        # at the interval; on a loaded machine admission may shed a few with a 503 and its
        # Retry-After too, so this wait has twice the usual patience (a tight loop is what
        # the check below catches, not a slow client)
        await kit.until(
            f"poll {POLLS_WHILE_DOWN} times while the tag store is down",
            lambda ex: sum(answered_degraded(e) for e in polls_after(ex, down)) >= POLLS_WHILE_DOWN,
            patience_s=2 * PATIENCE_S,
        )
        await switch.set(down=False)
    finally:
        await switch.close()
    up = time.monotonic()
    await kit.until(
        "poll on once the tag store is back",
        lambda ex: any(
            e.status in (200, 204) and e.answer_headers.get("X-Mlutp-Wait") != "unavailable"
            for e in polls_after(ex, up)
        ),
    )
    during = [e for e in kit.exchanges() if down < e.at < up and e.kind == "poll"]
    if not during:
        return ["no poll while the tag store was down"]
    # the general interval check names a poll sooner than its interval; here, the whole
    # outage: no more polls than its length allows at the shortest interval the server gives
    most = (up - down) / 1.0 + 1
    if len(during) > most:
        return [f"{len(during)} polls in a {up - down:.1f} s outage: a tight loop"]
    return []


async def retry_after(kit: Kit) -> list[str]:
    """A 503 with Retry-After: the client comes back no sooner."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    kit.recorder.shed_polls, kit.recorder.retry_after_s = 1, 2
    await kit.until(
        "poll again after a 503",
        lambda ex: any(
            e.status == 503 and len(polls_after(ex, e.at)) >= 1 for e in ex if e.kind == "poll"
        ),
    )
    return []


async def app_restart(kit: Kit) -> list[str]:
    """A restarted app launches with the orders and tags it kept: nothing unchanged is
    fetched again."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    # before: a page's restart returns once it has loaded, and it may have launched by then
    restarted = time.monotonic()
    await kit.client.restart()
    await kit.until(
        "launch and poll after the restart",
        lambda ex: (
            any(e.kind == "launch" and e.at > restarted for e in ex)
            and len(polls_after(ex, restarted)) >= 1
        ),
    )
    after = [e for e in kit.exchanges() if e.at > restarted]
    launch = next(e for e in after if e.kind == "launch")
    problems = []
    known = {k.get("orderid"): k for k in launch.request.get("known_orders", [])}
    if not known.get(orderid, {}).get("tags"):
        problems.append("the launch after a restart named no tags it had kept")
    parts = [e for e in after if e.kind == "part" and "/route" not in e.path]
    if parts:
        problems.append(f"{len(parts)} part requests after a restart with nothing changed")
    return problems


def _stated_versions(exchange: Exchange) -> dict[str, str]:
    """The policy versions the client's request names (its `policy_versions`)."""
    versions: dict[str, str] = exchange.request.get("policy_versions", {})
    return versions


async def policy_change(kit: Kit) -> list[str]:
    """A new taxi policy deployed (its parts laid out anew): the client, told so by a poll,
    launches again at once naming the version it was told, fetches the new layout's parts,
    and from then on polls holding the new version."""
    orderid = await kit.create_order(status="driving")
    await caught_up(kit, orderid)
    new_version = load_policy(kit.policy_paths["new"]).version("taxi")
    deployed = time.monotonic()
    kit.after.append(lambda: kit.deploy_policy("announcing"))
    await kit.deploy_policy("new")

    def switched(ex: list[Exchange]) -> bool:
        return any(
            e.kind == "launch" and e.at > deployed and e.status == 200 for e in ex
        ) and fetched(ex, orderid, "eta", deployed)

    await kit.until("launch again and fetch the new layout's parts", switched)
    relaunched = next(
        e for e in kit.exchanges() if e.kind == "launch" and e.at > deployed and e.status == 200
    )
    await kit.until(
        "poll after the new layout", lambda ex: len(polls_after(ex, relaunched.at)) >= 1
    )
    problems = []
    told = [
        e
        for e in polls_after(kit.exchanges(), deployed)
        if e.at < relaunched.at
        and e.status == 200
        and (e.answer or {}).get("policy_versions", {}).get("taxi") == new_version
    ]
    if told and relaunched.at - told[0].answered > AT_ONCE_S:
        problems.append(
            f"launched {relaunched.at - told[0].answered:.1f} s after a poll told another "
            "policy version: not at once"
        )
    if _stated_versions(relaunched).get("taxi") not in (new_version, None) and told:
        problems.append("the launch did not name the policy version the poll told")
    stale = [
        e
        for e in polls_after(kit.exchanges(), relaunched.answered)
        if _stated_versions(e).get("taxi") != new_version
    ]
    if stale:
        problems.append(f"{len(stale)} polls after the new policy still named another version")
    return problems

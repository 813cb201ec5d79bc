"""The contract's rules for a client, as pure checks over the exchanges it made (one user's,
in order): each returns what broke a rule, in words; none, when the client kept it.

- never polls faster than the interval the last answer gave (after a wait's end or news it
  may poll at once; after a 503, not before its Retry-After);
- fetches exactly the parts `need_request` names (none else, none left out unless it is
  backing off after an error), by priority;
- sends back the tags it got;
- sends `force` only while a change of its own is unseen;
- keeps a stale order, with its echo fields;
- echoes the `version` of each actual order it holds (monotonic reads);
- keeps what it holds on a 204 (nothing new): the orders, and the answer_tag it sends back;
- sends a digest request only for the full body it sent last (each such poll is checked as
  that body by the rest);
- sends `position` in the design note's shape, `{"point": [lon, lat], "dx": <metres>}`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from client.model import POLL_AGAIN_AT_ONCE, STATE_KEYS
from devtools.conformance.recording import Exchange

# a launch's or a poll's statuses that are an answer: a 204 is the answer the client holds
ANSWERED = (200, 204)
# the clock's and the network's slack, in seconds
SLACK_S = 0.1
# part requests that start this close together were sent in parallel: no order between them
PARALLEL_S = 0.05


def _orders(exchange: Exchange) -> list[dict[str, Any]]:
    answer = exchange.answer or {}
    if exchange.kind == "launch":
        answer = answer.get("mlutp_orders_state", {})
    orders: list[dict[str, Any]] = answer.get("orders", [])
    return orders


def _requests(exchanges: Sequence[Exchange]) -> list[Exchange]:
    """Launches and polls, in the order they were sent: the requests the interval is about.
    (Exchanges are recorded as answered: a poll an app gave up on comes back late.)"""
    return sorted((e for e in exchanges if e.kind in ("launch", "poll")), key=lambda e: e.at)


def _named(exchange: Exchange) -> set[tuple[str, str]]:
    """(orderid, part) an answer's need_request names for actual orders."""
    return {
        (order["orderid"], part)
        for order in _orders(exchange)
        if order.get("update_status") == "actual"
        for part in order.get("need_request", [])
        if part not in order.get("parts", {})
    }


def _fetched_between(exchanges: Sequence[Exchange], start: float, end: float) -> bool:
    return any(e.kind == "part" and start <= e.at <= end for e in exchanges)


def _changed_between(exchanges: Sequence[Exchange], start: float, end: float) -> bool:
    """A user change was sent between these moments."""
    return any(e.kind == "feature" and start < e.at < end for e in exchanges)


def interval_kept(exchanges: Sequence[Exchange]) -> list[str]:
    problems = []
    asked = _requests(exchanges)
    for before, after in itertools.pairwise(asked):
        gap = after.at - before.at
        if before.status == 503:
            wait_s = float(before.answer_headers.get("Retry-After", 0))
            if gap + SLACK_S < wait_s:
                problems.append(f"polled {gap:.2f} s after a 503 with Retry-After {wait_s:.0f} s")
            continue
        # after a wait or news: at once, unless the news was parts the client did not fetch
        # (backing off): the same news again and again, a tight loop
        if before.answer_headers.get("X-Mlutp-Wait") in POLL_AGAIN_AT_ONCE and (
            not _named(before) or _fetched_between(exchanges, before.at, after.at)
        ):
            continue
        if _changed_between(exchanges, before.at, after.at):
            continue  # the user changed an order: polled at once, with force
        if after.kind == "launch" and before.kind == "poll":
            continue  # told to hold another policy: launch again at once
        interval_ms = before.answer_headers.get("X-Yataxi-Polling-Interval-Ms")
        if interval_ms is None or before.status not in ANSWERED:
            continue
        if gap + SLACK_S < int(interval_ms) / 1000:
            problems.append(f"polled {gap:.2f} s after an answer that said {interval_ms} ms")
    return problems


def retry_after_obeyed(exchanges: Sequence[Exchange]) -> list[str]:
    return [p for p in interval_kept(exchanges) if "Retry-After" in p]


def need_request_fetched(
    exchanges: Sequence[Exchange], part_urls: Mapping[str, tuple[str, str, int]]
) -> list[str]:
    """`part_urls`: a part endpoint's path → (service, part name, priority), from the policy."""
    problems = []
    failed: set[tuple[str, str]] = set()
    needed: set[tuple[str, str]] = set()
    fetched: list[tuple[Exchange, str, str, int]] = []

    def close_round() -> None:
        for orderid, part in sorted(needed - {(o, p) for _, o, p, _ in fetched} - failed):
            problems.append(f"{part} of {orderid} was named in need_request and not fetched")
        order = sorted(fetched, key=lambda f: f[0].at)
        for (a, _, pa, prio_a), (b, _, pb, prio_b) in itertools.pairwise(order):
            if b.at - a.at > PARALLEL_S and prio_b < prio_a:
                problems.append(f"{pb} (priority {prio_b}) fetched after {pa} ({prio_a})")

    asked_at = 0.0  # when the last answered launch or poll was sent
    for exchange in exchanges:
        if exchange.kind in ("launch", "poll"):
            if exchange.status not in ANSWERED:
                continue
            if _changed_between(exchanges, asked_at, exchange.at):
                # the last answer was given up for a poll naming the user's change
                needed = set()
            close_round()
            needed, fetched, asked_at = set(), [], exchange.at
            for order in _orders(exchange):
                inline = set(order.get("parts", {}))
                for part in order.get("need_request", []):
                    if part not in inline and order.get("update_status") == "actual":
                        needed.add((order["orderid"], part))
            continue
        target = part_urls.get(exchange.path)
        if target is None or target[1] == "route":
            continue
        _, part, priority = target
        for item in exchange.request.get("orders", []):
            orderid = item.get("orderid")
            if (orderid, part) not in needed:
                problems.append(f"{part} of {orderid} fetched but not named in need_request")
            fetched.append((exchange, orderid, part, priority))
        answered = {o.get("orderid"): o for o in (exchange.answer or {}).get("orders", [])}
        for item in exchange.request.get("orders", []):
            result = answered.get(item.get("orderid"))
            key = (item.get("orderid"), part)
            if exchange.status != 200 or result is None or "error" in result:
                failed.add(key)  # backing off: it may be left out next time
            else:
                failed.discard(key)
    return problems


def tags_sent_back(
    exchanges: Sequence[Exchange],
    part_urls: Mapping[str, tuple[str, str, int]],
    own_rule_parts: frozenset[str] = frozenset(),
) -> list[str]:
    """`own_rule_parts`: parts polled by their own rule (the route), whose tags decide
    nothing: sent back or not, either is right."""
    problems = []
    held: dict[str, dict[str, str]] = {}  # orderid → part → the tag the client should hold
    for exchange in exchanges:
        if exchange.kind in ("launch", "poll") and exchange.request:
            for known in exchange.request.get("known_orders", []):
                expected = held.get(known.get("orderid", ""))
                sent = {
                    part: tag
                    for part, tag in known.get("tags", {}).items()
                    if part not in own_rule_parts
                }
                if expected is not None and sent != expected:
                    problems.append(
                        f"{known.get('orderid')}: sent tags {sorted(sent.items())}"
                        f", held {sorted(expected.items())}"
                    )
        if exchange.kind in ("launch", "poll") and exchange.status in ANSWERED:
            for order in _orders(exchange):
                if order.get("update_status") != "actual":
                    continue
                tags = {p: t for p, t in order.get("tags", {}).items() if p not in own_rule_parts}
                for part, fields in order.get("parts", {}).items():
                    if isinstance(fields, dict) and fields.get("tag"):
                        tags[part] = fields["tag"]
                held[order["orderid"]] = tags
        elif exchange.kind == "part" and exchange.status == 200:
            target = part_urls.get(exchange.path)
            if target is None or target[1] == "route":
                continue
            for result in (exchange.answer or {}).get("orders", []):
                # a part answered `unchanged` has a new tag too: the client holds that one
                if "error" not in result and result.get("tag"):
                    held.setdefault(result["orderid"], {})[target[1]] = result["tag"]
    return problems


def user_changes(exchanges: Sequence[Exchange]) -> dict[str, int]:
    """orderid → the data version the user's changes of it lead to: what the feature answered,
    or after a conflict the version to catch up to."""
    changes: dict[str, int] = {}
    for exchange in exchanges:
        if exchange.kind != "feature" or exchange.answer is None:
            continue
        orderid = exchange.path.rstrip("/").split("/")[-2]
        version = exchange.answer.get("version", exchange.answer.get("current_version"))
        if isinstance(version, int):
            changes[orderid] = max(changes.get(orderid, 0), version)
    return changes


def force_only_while_unseen(
    exchanges: Sequence[Exchange], changes: Mapping[str, int] | None = None
) -> list[str]:
    """`changes`: orderid → the data version a change of the user's leads to (by default,
    from the feature calls among the exchanges)."""
    if changes is None:
        changes = user_changes(exchanges)
    problems = []
    seen: dict[str, int] = {}
    for exchange in exchanges:
        if exchange.kind in ("launch", "poll"):
            for known in exchange.request.get("known_orders", []):
                orderid = known.get("orderid", "")
                if not known.get("force"):
                    continue
                version = changes.get(orderid)
                if version is None:
                    problems.append(f"{orderid}: force sent with no change of the user's")
                elif seen.get(orderid, 0) >= version:
                    problems.append(f"{orderid}: force sent after version {version} was seen")
        if exchange.kind == "part" and exchange.status == 200:
            for result in (exchange.answer or {}).get("orders", []):
                version = result.get("version")
                if isinstance(version, int):
                    seen[result["orderid"]] = max(seen.get(result["orderid"], 0), version)
    return problems


def stale_orders_kept_with_echo(exchanges: Sequence[Exchange]) -> list[str]:
    problems = []
    brief: dict[str, dict[str, Any]] = {}  # orderid → its brief fields, as last seen actual
    stale: set[str] = set()
    for exchange in exchanges:
        if exchange.kind not in ("launch", "poll"):
            continue
        sent = {k.get("orderid"): k for k in exchange.request.get("known_orders", [])}
        for orderid in sorted(stale):
            known = sent.get(orderid)
            if known is None:
                problems.append(f"{orderid} came back stale and was not polled for again")
                continue
            missing = {k for k, v in brief.get(orderid, {}).items() if known.get(k) != v}
            if missing:
                problems.append(f"{orderid} (stale) was polled without its echo {sorted(missing)}")
        if exchange.status not in ANSWERED:
            continue
        stale = set()
        for order in _orders(exchange):
            if order.get("update_status") == "stale":
                stale.add(order["orderid"])
            elif order.get("update_status") == "actual":
                brief[order["orderid"]] = {k: v for k, v in order.items() if k not in STATE_KEYS}
    return problems


def versions_echoed(exchanges: Sequence[Exchange]) -> list[str]:
    """Each order the client holds is named with the `version` of the last actual answer
    that gave one before the request went out (a stale answer echoes it and changes
    nothing): without it, the server cannot keep the order from going backwards
    (docs/protocol.md: Orders and their order)."""
    polls = [e for e in exchanges if e.kind in ("launch", "poll")]
    # requests as they came and answers as they went back (a held poll's answer may come
    # after a later launch's): at one moment a request first, its own answer cannot precede it
    events = sorted(
        [(e.at, 0, i) for i, e in enumerate(polls)]
        + [(e.answered or e.at, 1, i) for i, e in enumerate(polls)]
    )
    problems = []
    held: dict[str, int] = {}  # orderid → the version of its last actual answer
    for _, is_answer, index in events:
        exchange = polls[index]
        if not is_answer:
            for known in exchange.request.get("known_orders", []):
                orderid = known.get("orderid", "")
                version = held.get(orderid)
                if version is not None and known.get("version") != version:
                    echoed = known.get("version")
                    problems.append(f"{orderid} was polled with version {echoed}, not {version}")
            continue
        if exchange.status not in ANSWERED:
            continue
        for order in _orders(exchange):
            version = order.get("version")
            if order.get("update_status") == "actual" and isinstance(version, int):
                held[order["orderid"]] = version
    return problems


def answer_kept(exchanges: Sequence[Exchange]) -> list[str]:
    """A 204 says the answer the client holds is the answer: it keeps every order of it, and
    sends back the same answer_tag (docs/protocol.md: Polling orders). A client that takes a
    204 for an error (its answer forgotten) or for an empty answer (its orders dropped) shows
    it in its next request. A client that sends an older tag, or none (a restarted app, one
    that does not revalidate), is answered in full: only the poll after a 204 must send the
    tag the 204 stood for."""
    polls = [e for e in exchanges if e.kind in ("launch", "poll")]
    # requests as they came and answers as they went back, as versions_echoed reads them
    events = sorted(
        [(e.at, 0, i) for i, e in enumerate(polls)]
        + [(e.answered or e.at, 1, i) for i, e in enumerate(polls)]
    )
    problems = []
    tag: str | None = None  # the answer_tag of the last orders/state answer seen
    kept: set[str] | None = None  # after a 204, the orders of the answer it stood for
    for _, is_answer, index in events:
        exchange = polls[index]
        if is_answer:
            if exchange.status in ANSWERED and exchange.kind == "poll":
                if exchange.status == 204:
                    tag = exchange.request.get("answer_tag")
                    kept = {o.get("orderid", "") for o in _orders(exchange)}
                else:
                    tag, kept = (exchange.answer or {}).get("answer_tag"), None
            elif exchange.status in ANSWERED:
                kept = None
            continue
        named = {k.get("orderid", "") for k in exchange.request.get("known_orders", [])}
        for orderid in sorted((kept or set()) - named):
            problems.append(f"{orderid} was left out of the request after a 204 (nothing new)")
        if exchange.kind != "poll":
            continue
        sent = exchange.request.get("answer_tag")
        # after a 204 the tag it stood for; otherwise an older tag only costs a full answer
        # (an app restarted with its stored tag, a poll sent before the last answer came)
        if kept is not None and sent != tag:
            problems.append(f"polled with answer_tag {sent} after a 204 for {tag}")
    return problems


def digests_stand_for_previous(exchanges: Sequence[Exchange]) -> list[str]:
    """A digest request stands for the full body the client sent last to orders/state, byte
    for byte (docs/protocol.md: The digest request): the digest of another body (an older
    one, one never sent, one hashed after gzip or re-encoded) asks the server for something
    else than the client means, or for nothing."""
    return [
        f"sent request_digest {e.digest} that is not the digest of its previous full body"
        for e in exchanges
        if e.kind == "poll" and e.digest is not None and not e.digest_stood_for
    ]


POSITION_SHAPE = '{"point": [lon, lat], "dx": <metres>}'


def _number(value: object) -> TypeGuard[float]:
    # JSON's true and false are not numbers, though Python's bool is an int
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_design_position(value: object) -> bool:
    """`{"point": [lon, lat], "dx": <accuracy in metres, ≥ 0>}`: what totw reads (docs/protocol.md:
    Part endpoints); a bare `[lon, lat]` it would misread."""
    if not isinstance(value, dict):
        return False
    point, dx = value.get("point"), value.get("dx")
    return (
        isinstance(point, list)
        and len(point) == 2
        and all(_number(c) for c in point)
        and _number(dx)
        and dx >= 0
    )


def position_shaped(
    exchanges: Sequence[Exchange], part_urls: Mapping[str, tuple[str, str, int]]
) -> list[str]:
    """`position` where a client sends it: its part requests, and launch's `part_parameters`
    (the inline parts are fetched with them). Absent is fine: the app may not know where it is."""
    problems = []

    def look(where: str, fields: object) -> None:
        if isinstance(fields, dict) and "position" in fields:
            position = fields["position"]
            if not is_design_position(position):
                problems.append(f"{where}: position {json.dumps(position)} is not {POSITION_SHAPE}")

    for exchange in exchanges:
        if exchange.kind == "launch":
            parameters = exchange.request.get("part_parameters")
            if isinstance(parameters, dict):
                for part_type, fields in parameters.items():
                    look(f"launch part_parameters {part_type}", fields)
        elif exchange.kind == "part" and exchange.path in part_urls:
            look(exchange.path, exchange.request)
    return problems

"""The conformance kit (issue 27): its checks say what a client did against the contract (each
check fed exchanges that break its rule, and ones that keep it), the reference client passes
its scenarios on a real stack, and a client that breaks a rule fails with the rule named."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import client.client as client_module
from client import timing
from client.model import POLL_AGAIN_AT_ONCE, Rule
from client.transport import Reply, Transport
from devtools.conformance import checks, outages
from devtools.conformance.browser import BrowserClient, NoBrowser, find_browser
from devtools.conformance.clients import KIT_OPTIONS, PythonClient
from devtools.conformance.flow import CLOSE_M
from devtools.conformance.kit import route_urls
from devtools.conformance.recording import LAUNCH_PATH, POLL_PATH, Exchange
from devtools.conformance.runner import check, part_urls, run
from devtools.conformance.scenarios import SCENARIOS
from devtools.rollout import write_rollout
from shared.policy import DEFAULT_POLICY_PATH

FAST = "/mlutp/v1/taxi/fast_info"
RARE = "/mlutp/v1/taxi/rarely_changed"
URLS = {FAST: ("taxi", "fast_info", 0), RARE: ("taxi", "rarely_changed", 1)}


def poll(
    at: float,
    known: list[dict[str, Any]],
    orders: list[dict[str, Any]],
    *,
    status: int = 200,
    interval_ms: int = 1000,
    waited: str | None = None,
    retry_after: int | None = None,
) -> Exchange:
    headers = {"X-Yataxi-Polling-Interval-Ms": str(interval_ms)}
    if waited:
        headers["X-Mlutp-Wait"] = waited
    if retry_after is not None:
        headers = {"Retry-After": str(retry_after)}
    answer = {"orders": orders} if status == 200 else None
    return Exchange(at, POLL_PATH, "u", {"known_orders": known}, {}, status, headers, answer)


def part(at: float, path: str, orderid: str, tag: str = "t", error: bool = False) -> Exchange:
    result = (
        {"orderid": orderid, "error": {"update_status": "stale"}}
        if error
        else {"orderid": orderid, "tag": tag, "version": 2}
    )
    return Exchange(
        at, path, "u", {"orders": [{"orderid": orderid}]}, {}, 200, {}, {"orders": [result]}
    )


def order(need: list[str], tags: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "orderid": "o1",
        "service": "taxi",
        "status": "driving",
        "update_status": "actual",
        "need_request": need,
        "tags": tags or {},
        **extra,
    }


def test_polling_faster_than_the_interval_or_the_retry_after_is_named():
    kept = [
        poll(0, [], [], interval_ms=1000),
        poll(1.0, [], [], waited="timeout"),
        poll(1.1, [], []),
    ]
    assert checks.interval_kept(kept) == []
    too_soon = [poll(0, [], [], interval_ms=2000), poll(0.5, [], [])]
    assert checks.interval_kept(too_soon) == ["polled 0.50 s after an answer that said 2000 ms"]
    shed = [poll(0, [], [], status=503, retry_after=3), poll(1.0, [], [])]
    assert checks.retry_after_obeyed(shed) == ["polled 1.00 s after a 503 with Retry-After 3 s"]
    assert checks.retry_after_obeyed([shed[0], poll(3.0, [], [])]) == []


def test_polling_at_once_after_news_the_client_did_not_act_on_is_a_tight_loop():
    news = poll(0, [], [order(["fast_info"])], interval_ms=2000, waited="news")
    acted = [news, part(0.01, FAST, "o1"), poll(0.05, [], [])]
    assert checks.interval_kept(acted) == []
    # the part backing off: not fetched, and the same news asked for again at once
    assert checks.interval_kept([news, poll(0.05, [], [])]) == [
        "polled 0.05 s after an answer that said 2000 ms"
    ]
    # a user change meanwhile: the answer is given up for a poll with force, at once
    change = Exchange(0.02, "/emulator/v1/features/taxi/o1/tips", "u", {}, {}, 200, {}, {})
    assert checks.interval_kept([news, change, poll(0.05, [], [])]) == []
    assert checks.need_request_fetched([news, change, poll(0.05, [], [])], URLS) == []
    # news with nothing to fetch (a status moved on): at once is right
    moved = poll(0, [], [order([])], interval_ms=2000, waited="news")
    assert checks.interval_kept([moved, poll(0.05, [], [])]) == []


def test_a_poll_answered_while_the_tag_store_is_down_counts_whether_200_or_204():
    def waiting(status: int, wait: str) -> Exchange:
        headers = {"X-Mlutp-Wait": wait}
        return Exchange(0, POLL_PATH, "u", {"wait_ms": 2000}, {}, status, headers, {"orders": []})

    # a waiting client is told so; one that sent its answer_tag back is told "nothing new" by
    # a 204
    assert outages.answered_degraded(waiting(200, "unavailable"))
    assert outages.answered_degraded(waiting(204, "unavailable"))
    # a wait that ran is no answer of a store that is down; nor is a 503
    assert not outages.answered_degraded(waiting(204, "timeout"))
    assert not outages.answered_degraded(waiting(503, "unavailable"))
    # a plain poll cannot tell: any answer counts
    assert outages.answered_degraded(poll(0, [], [], status=204))


def test_a_part_not_named_or_named_and_not_fetched_or_out_of_priority_is_named():
    named = poll(0, [], [order(["fast_info", "rarely_changed"])])
    exact = [named, part(0.1, FAST, "o1"), part(0.3, RARE, "o1"), poll(2, [], [order([])])]
    assert checks.need_request_fetched(exact, URLS) == []
    extra = [poll(0, [], [order([])]), part(0.1, FAST, "o1")]
    assert checks.need_request_fetched(extra, URLS) == [
        "fast_info of o1 fetched but not named in need_request"
    ]
    missing = [named, part(0.1, FAST, "o1"), poll(2, [], [order([])])]
    assert checks.need_request_fetched(missing, URLS) == [
        "rarely_changed of o1 was named in need_request and not fetched"
    ]
    backwards = [named, part(0.1, RARE, "o1"), part(0.3, FAST, "o1"), poll(2, [], [order([])])]
    assert checks.need_request_fetched(backwards, URLS) == [
        "fast_info (priority 0) fetched after rarely_changed (1)"
    ]
    # a part that failed may wait out its backoff
    failed = [
        poll(0, [], [order(["fast_info"])]),
        part(0.1, FAST, "o1", error=True),
        poll(2, [], [order(["fast_info"])]),
        poll(4, [], [order([])]),
    ]
    assert checks.need_request_fetched(failed, URLS) == []


def test_tags_not_sent_back_as_received_are_named():
    got = [
        poll(0, [], [order(["fast_info"], {"rarely_changed": "r1"})]),
        part(0.1, FAST, "o1", "f1"),
    ]
    back = {"orderid": "o1", "tags": {"rarely_changed": "r1", "fast_info": "f1"}}
    assert checks.tags_sent_back([*got, poll(2, [back], [])], URLS) == []
    wrong = {"orderid": "o1", "tags": {"rarely_changed": "r1"}}
    [problem] = checks.tags_sent_back([*got, poll(2, [wrong], [])], URLS)
    assert problem.startswith("o1: sent tags")


def test_force_without_an_unseen_change_is_named():
    forced = {"orderid": "o1", "tags": {}, "force": True}
    assert checks.force_only_while_unseen([poll(0, [forced], [])], {}) == [
        "o1: force sent with no change of the user's"
    ]
    while_unseen = [poll(0, [forced], []), part(0.1, FAST, "o1"), poll(1, [forced], [])]
    assert checks.force_only_while_unseen(while_unseen[:1], {"o1": 2}) == []
    assert checks.force_only_while_unseen(while_unseen, {"o1": 2}) == [
        "o1: force sent after version 2 was seen"
    ]


def test_the_changes_a_user_made_are_read_from_the_feature_calls():
    path = "/emulator/v1/features/taxi/o1/comment"
    conflict = Exchange(
        0,
        path,
        "u",
        {"value": "x", "version": 1},
        {},
        409,
        {},
        {"code": "version_conflict", "current_version": 3},
    )
    retried = Exchange(1, path, "u", {"value": "x", "version": 3}, {}, 200, {}, {"version": 4})
    assert checks.user_changes([conflict]) == {"o1": 3}
    assert checks.user_changes([conflict, retried]) == {"o1": 4}
    forced = {"orderid": "o1", "tags": {}, "force": True}
    # force while catching up to version 3 and until 4 is seen; not after
    exchanges = [
        conflict,
        poll(0.5, [forced], []),
        retried,
        poll(1.5, [forced], []),
        part(2, FAST, "o1"),
        poll(3, [forced], []),
    ]
    exchanges[4].answer = {"orders": [{"orderid": "o1", "tag": "t", "version": 4}]}
    assert checks.force_only_while_unseen(exchanges) == ["o1: force sent after version 4 was seen"]


def test_a_stale_order_dropped_or_polled_without_its_echo_is_named():
    actual = order([], short_address="Lenina 1")
    stale = {**actual, "update_status": "stale"}
    seen = [poll(0, [], [actual]), poll(1, [], [stale])]
    kept = {"orderid": "o1", "tags": {}, "short_address": "Lenina 1"}
    assert checks.stale_orders_kept_with_echo([*seen, poll(2, [kept], [])]) == []
    assert checks.stale_orders_kept_with_echo([*seen, poll(2, [], [])]) == [
        "o1 came back stale and was not polled for again"
    ]
    no_echo = {"orderid": "o1", "tags": {}}
    assert checks.stale_orders_kept_with_echo([*seen, poll(2, [no_echo], [])]) == [
        "o1 (stale) was polled without its echo ['short_address']"
    ]


def test_an_order_polled_without_the_version_of_its_last_actual_answer_is_named():
    seen = [
        poll(0, [], [order([], version=7)]),
        poll(1, [], [{**order([]), "version": 6, "update_status": "stale"}]),
    ]
    echoed = {"orderid": "o1", "tags": {}, "version": 7}
    # a stale answer echoes what the client sent: the client keeps the version it got actual
    assert checks.versions_echoed([*seen, poll(2, [echoed], [])]) == []
    assert checks.versions_echoed([*seen, poll(2, [{**echoed, "version": 6}], [])]) == [
        "o1 was polled with version 6, not 7"
    ]
    assert checks.versions_echoed([*seen, poll(2, [{"orderid": "o1", "tags": {}}], [])]) == [
        "o1 was polled with version None, not 7"
    ]
    # a held poll sent with 7 comes back after an answer that gave 8: it could not know 8
    held = dataclasses.replace(poll(2, [echoed], []), answered=5)
    newer = dataclasses.replace(poll(3, [echoed], [order([], version=8)]), answered=4)
    assert checks.versions_echoed([seen[0], newer, held]) == []


def tagged(
    at: float, known: list[dict[str, Any]], sent: str | None, status: int, tag: str
) -> Exchange:
    """A poll that sent `sent` as its answer_tag: a 200 carrying `tag`, or a 204 standing for
    the answer that carried it (as the recorder gives it)."""
    exchange = poll(at, known, [order([])])
    if sent is not None:
        exchange.request["answer_tag"] = sent
    exchange.status = status
    exchange.answer = {"orders": [order([])], "answer_tag": tag}
    return exchange


def test_a_client_that_drops_what_it_holds_on_a_204_is_named():
    """docs/protocol.md: Polling orders: a 204 is the answer the client holds, again: it keeps
    its orders and sends the same answer_tag back."""
    known = [{"orderid": "o1", "tags": {}}]
    got = [tagged(0, [], None, 200, "A"), tagged(1, known, "A", 204, "A")]
    assert checks.answer_kept([*got, tagged(2, known, "A", 204, "A")]) == []
    # taken for an error: the answer and its tag forgotten
    assert checks.answer_kept([*got, tagged(2, known, None, 200, "A")]) == [
        "polled with answer_tag None after a 204 for A"
    ]
    # taken for an empty answer: the orders dropped
    assert checks.answer_kept([*got, tagged(2, [], "A", 200, "B")]) == [
        "o1 was left out of the request after a 204 (nothing new)"
    ]
    # news after it: the new tag is the one to send; an older one only costs a full answer
    # (an app restarted with its stored tag, a poll sent before the last answer came)
    moved = [*got, tagged(2, known, "A", 200, "B")]
    assert checks.answer_kept([*moved, tagged(3, known, "B", 204, "B")]) == []
    assert checks.answer_kept([*moved, tagged(3, known, "A", 200, "B")]) == []
    # a client that sends none (a restarted app, one that never revalidates) is answered in full
    assert (
        checks.answer_kept([tagged(0, [], None, 200, "A"), tagged(1, known, None, 200, "A")]) == []
    )
    # the runner checks every scenario for it
    assert "nothing new: polled with answer_tag None after a 204 for A" in check(
        [*got, tagged(2, known, None, 200, "A")], [DEFAULT_POLICY_PATH]
    )


def test_a_position_of_another_shape_than_the_design_notes_is_named():
    """docs/protocol.md (Part endpoints): `position` is `{"point": [lon, lat], "dx": <metres>}`,
    in part requests and in launch's part_parameters; absent is fine."""
    design = {"point": [37.6, 55.7], "dx": 1009}
    launch = Exchange(
        0,
        LAUNCH_PATH,
        "u",
        {"part_parameters": {"totw": {"position": design, "format_currency": True}}},
        {},
        200,
        {},
        {"mlutp_orders_state": {"orders": []}},
    )
    fetch = part(0.1, FAST, "o1")
    fetch.request["position"] = design
    unknown = part(0.2, RARE, "o1")  # the app does not know where it is
    assert checks.position_shaped([launch, fetch, unknown], URLS) == []

    old = part(0.1, FAST, "o1")
    old.request["position"] = [37.6, 55.7]
    assert checks.position_shaped([old], URLS) == [
        f'{FAST}: position [37.6, 55.7] is not {{"point": [lon, lat], "dx": <metres>}}'
    ]
    launch.request["part_parameters"]["totw"]["position"] = [37.6, 55.7]
    assert checks.position_shaped([launch], URLS) == [
        "launch part_parameters totw: position [37.6, 55.7] is not "
        '{"point": [lon, lat], "dx": <metres>}'
    ]
    for bad in (
        None,
        {"point": [37.6, 55.7]},
        {"point": [37.6], "dx": 1009},
        {"point": ["37.6", "55.7"], "dx": 1009},
        {"point": [True, False], "dx": 1009},
        {"point": [37.6, 55.7], "dx": -1},
        {"point": [37.6, 55.7], "dx": "1009"},
    ):
        fetch.request["position"] = bad
        assert len(checks.position_shaped([fetch], URLS)) == 1, bad
    # the runner checks every scenario's part requests for it
    assert any(p.startswith("position: ") for p in check([old], [DEFAULT_POLICY_PATH]))


def test_the_kit_knows_every_part_endpoint_but_the_routes(tmp_path: Path):
    urls = part_urls()
    assert urls[FAST] == ("taxi", "fast_info", 0)
    assert not any(name == "route" for _, name, _ in urls.values())
    assert LAUNCH_PATH not in urls
    # with the rollout's files, every version's endpoints: the next layout's own part too
    rollout = write_rollout(tmp_path)
    assert ("taxi", "eta", 1) in part_urls(rollout.values()).values()
    assert set(route_urls(rollout.values())) == {"/mlutp/v1/taxi/route", "/mlutp/v2/taxi/route"}


def test_route_tags_are_neither_required_nor_refused_back():
    got = [poll(0, [], [order([], {"fast_info": "f1"})])]
    with_route = {"orderid": "o1", "tags": {"fast_info": "f1", "route": "r1"}}
    without = {"orderid": "o1", "tags": {"fast_info": "f1"}}
    for known in (with_route, without):
        assert checks.tags_sent_back([*got, poll(2, [known], [])], URLS, frozenset({"route"})) == []


# every scenario, in shares that each run on a stack of their own, side by side in a parallel
# run: all of them one after another take about three minutes here
SHARES = 4
SCENARIO_SHARES = [list(SCENARIOS)[share::SHARES] for share in range(SHARES)]
SHARE_IDS = [f"share{share + 1}of{SHARES}" for share in range(SHARES)]


def test_the_shares_hold_every_scenario_once():
    assert sorted(name for share in SCENARIO_SHARES for name in share) == sorted(SCENARIOS)


@pytest.mark.long
@pytest.mark.parametrize("scenarios", SCENARIO_SHARES, ids=SHARE_IDS)
def test_the_reference_client_passes_every_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenarios: list[str]
):
    report = tmp_path / "report.json"
    assert run(PythonClient(tmp_path), scenarios, report, tmp_path) == 0, report.read_text()
    written = json.loads(report.read_text())
    assert written["passed"] is True
    assert [s["scenario"] for s in written["scenarios"]] == scenarios
    assert all(s["requests"] > 0 for s in written["scenarios"])
    # the table names each scenario
    out = capsys.readouterr().out
    assert all(name in out for name in scenarios)


@pytest.mark.long
@pytest.mark.browser
@pytest.mark.parametrize("scenarios", SCENARIO_SHARES, ids=SHARE_IDS)
def test_the_browser_client_passes_every_scenario_in_chromium(tmp_path: Path, scenarios: list[str]):
    try:
        find_browser()
    except NoBrowser as exc:
        pytest.skip(f"SKIPPED: no Chromium here: {exc}; .ci/run installs them")
    report = tmp_path / "report.json"
    assert run(BrowserClient(), scenarios, report, tmp_path) == 0, report.read_text()
    assert json.loads(report.read_text())["client"] == "browser"


def test_a_client_that_drops_its_tags_fails_with_the_rule_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    original = client_module.known_orders

    def without_tags(orders: Any) -> list[dict[str, Any]]:
        return [{**known, "tags": {}} for known in original(orders)]

    monkeypatch.setattr(client_module, "known_orders", without_tags)
    problems = failed(tmp_path, PythonClient(tmp_path), "a status change")
    assert any(problem.startswith("tags: ") for problem in problems)


@pytest.mark.long  # a scenario on a stack of its own
def test_a_client_that_takes_a_204_for_an_error_fails_with_the_rule_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """As a stock client's success check took a 304: no answer, and what it held forgotten."""
    original = Transport.call

    async def no_answer_on_a_204(self: Transport, url: str, body: Any, **kwargs: Any) -> Reply:
        reply = await original(self, url, body, **kwargs)
        if reply.status == 204:
            self._held.clear()
            return dataclasses.replace(reply, status=0)
        return reply

    monkeypatch.setattr(Transport, "call", no_answer_on_a_204)
    # polls while the tag store is down: nothing new, answered at once
    problems = failed(tmp_path, PythonClient(tmp_path), "the tag cache down")
    assert any(
        p.startswith("nothing new: polled with answer_tag None after a 204") for p in problems
    )


@pytest.mark.long  # a scenario on a stack of its own
def test_a_client_that_sends_a_bare_lon_lat_position_fails_with_the_rule_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    original = client_module.part_parameters

    def bare_position(*args: Any) -> dict[str, Any]:
        parameters = original(*args)
        if "position" in parameters:
            parameters["position"] = parameters["position"]["point"]
        return parameters

    monkeypatch.setattr(client_module, "part_parameters", bare_position)
    problems = failed(tmp_path, PythonClient(tmp_path), "a new order")
    assert "position: launch part_parameters totw: position [37.6, 55.7] is not" in str(problems)
    assert any(p.startswith("position: /mlutp/") for p in problems)


def failed(tmp_path: Path, client: PythonClient, scenario: str) -> list[str]:
    """The problems of a scenario the client must fail."""
    report = tmp_path / "report.json"
    assert run(client, [scenario], report, tmp_path) == 1
    [result] = json.loads(report.read_text())["scenarios"]
    assert not result["passed"]
    problems: list[str] = result["problems"]
    return problems


@pytest.mark.long  # a scenario on a stack of its own
def test_a_client_whose_view_waits_for_every_part_fails_the_slow_part_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    original = client_module.rules_by_service

    def all_required(policy: Any) -> dict[str, list[Rule]]:
        rules = original(policy)
        return {s: [dataclasses.replace(r, required=True) for r in rs] for s, rs in rules.items()}

    monkeypatch.setattr(client_module, "rules_by_service", all_required)
    problems = failed(tmp_path, PythonClient(tmp_path), "a required and a slow part")
    # the slow part comes back late, or (past the BFF's deadline) as an error: such a view
    # changes late, or never
    assert any(
        "the view waited for a part that does not hold it" in p or "view did not show" in p
        for p in problems
    )


@pytest.mark.long  # a scenario on a stack of its own
def test_a_client_that_polls_at_once_when_told_unavailable_fails_the_tag_cache_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(timing, "POLL_AGAIN_AT_ONCE", POLL_AGAIN_AT_ONCE | {"unavailable"})
    problems = failed(tmp_path, PythonClient(tmp_path), "the tag cache down")
    assert any(p.startswith("interval: polled") for p in problems)


def test_a_client_polling_the_route_more_often_when_far_fails_the_route_scenario(tmp_path: Path):
    backwards = dataclasses.replace(
        KIT_OPTIONS, route_every_s=((CLOSE_M + 100, 6.0),), route_far_every_s=2.0
    )
    problems = failed(tmp_path, PythonClient(tmp_path, backwards), "the route by distance")
    assert any("not more often when close" in p for p in problems)

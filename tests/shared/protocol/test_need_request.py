"""need_request, rule by rule, as the SPEC words it."""

from __future__ import annotations

from shared.policy import PartRule, PollingType, load_policy
from shared.protocol.need_request import TagTimings, decide_parts, part_needed
from shared.protocol.tags import ClientTag, encode_tag

T = TagTimings(min_ttl_ms=2_000, degraded_min_ttl_ms=10_000)
NOW = 1_800_000_000_000
V = "646d451553"

# a policy version other than the one under test: the deprecated taxi layout's
OTHER_VERSION = load_policy().services["taxi"].deprecated[0].policy_version


def rule(
    name: str = "fast_info",
    *,
    static: bool = False,
    priority: int = 0,
    polling: PollingType = PollingType.TAG_DEFINED,
) -> PartRule:
    return PartRule(
        part_name=name,
        url=f"/p/{name}",
        fields=(name,),
        polling_type=polling,
        part_type="totw",
        priority=priority,
        static=static,
    )


def needed(
    client: ClientTag | None,
    stored: str | None,
    *,
    static: bool = False,
    force: bool = False,
    cache: bool = True,
) -> bool:
    return part_needed(
        rule(static=static),
        client,
        stored,
        force=force,
        cache_available=cache,
        now_ms=NOW,
        timings=T,
    )


def tag(content: str | None, age_ms: int) -> ClientTag:
    return ClientTag(V, content, NOW - age_ms)


def test_rule1_a_missing_or_invalid_client_tag_needs_the_part():
    assert needed(None, "v1")
    assert needed(None, "v1", static=True)
    assert needed(None, "v1", cache=False)


def test_rule2_a_static_part_with_a_valid_tag_is_never_needed():
    assert not needed(tag("old", 10**9), "new", static=True)
    assert not needed(tag("old", 10**9), "new", static=True, force=True)


def test_rule3_cache_unavailable_ignores_force_and_uses_the_degraded_ttl():
    assert not needed(tag("v1", 9_999), None, cache=False, force=True)
    assert needed(tag("v1", 10_000), None, cache=False)
    assert needed(tag("v1", 10_000), None, cache=False, force=True)


def test_rule4_unchanged_content_is_not_needed():
    assert not needed(tag("v1", 10**9), "v1")
    assert not needed(tag("v1", 10**9), "v1", force=True)


def test_rule5_changed_content_is_needed_after_min_ttl_or_when_forced():
    assert not needed(tag("v1", 1_999), "v2")
    assert needed(tag("v1", 2_000), "v2")
    assert needed(tag("v1", 0), "v2", force=True)


def test_unknown_content_issued_while_the_cache_was_down_never_matches():
    assert needed(tag(None, 2_000), "v1")
    assert needed(tag(None, 2_000), None)


def test_need_request_lists_parts_by_ascending_priority_and_echoes_valid_tags():
    rules = [rule("fast_info", priority=0), rule("chat", priority=3), rule("slow", priority=4)]
    good = encode_tag(V, "v1", NOW - 5_000)
    other_version = encode_tag(OTHER_VERSION, "v1", NOW - 5_000)
    decision = decide_parts(
        rules,
        V,
        {"fast_info": good, "chat": other_version, "slow": "garbage"},
        {"fast_info": "v2", "chat": "c1", "slow": "s1"},
        force=False,
        cache_available=True,
        now_ms=NOW,
        timings=T,
    )
    assert decision.need_request == ["fast_info", "chat", "slow"]
    assert decision.valid_tags == {"fast_info": good}


def test_parts_polled_by_route_rules_are_never_in_need_request():
    route = rule("route", polling=PollingType.ROUTE_DISTANCE_DEPENDED, priority=5)
    decision = decide_parts(
        [route], V, {}, None, force=False, cache_available=True, now_ms=NOW, timings=T
    )
    assert decision.need_request == []


def test_a_change_the_min_ttl_holds_back_is_due_when_the_ttl_has_passed():
    rules = [rule("fast_info"), rule("chat", priority=3)]
    fresh = encode_tag(V, "v1", NOW - 500)
    older = encode_tag(V, "c1", NOW - 1_500)
    decision = decide_parts(
        rules,
        V,
        {"fast_info": fresh, "chat": older},
        {"fast_info": "v2", "chat": "c2"},
        force=False,
        cache_available=True,
        now_ms=NOW,
        timings=T,
    )
    assert decision.need_request == []
    # the earlier of the two: chat's tag, issued 1.5 s ago, is 2 s old in 0.5 s
    assert decision.held_until_ms == NOW + 500


def test_nothing_is_held_back_when_content_matches_forced_or_the_cache_is_down():
    matching = {"fast_info": encode_tag(V, "v1", NOW - 500)}
    for stored, force, cache in [("v1", False, True), ("v2", True, True), ("v2", False, False)]:
        decision = decide_parts(
            [rule("fast_info")],
            V,
            matching,
            {"fast_info": stored},
            force=force,
            cache_available=cache,
            now_ms=NOW,
            timings=T,
        )
        assert decision.held_until_ms is None, (stored, force, cache)

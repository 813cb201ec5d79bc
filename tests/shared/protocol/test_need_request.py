"""need_request, rule by rule, as docs/protocol.md words it."""

from __future__ import annotations

from collections import Counter

from services.bff.config import ProtocolSettings
from services.bff.resources import timings
from shared.policy import PartRule, PollingType, load_policy
from shared.protocol.need_request import (
    AT_ONCE_MS,
    CACHE_UP,
    CacheState,
    decide_parts,
    part_due_at_ms,
    part_needed,
    part_needed_from_ms,
)
from shared.protocol.tags import (
    ClientTag,
    created_at_ms,
    decode_tag,
    encode_tag,
    made_tag,
    new_content_tag,
    refetch_phase,
)

T = timings(ProtocolSettings())
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
        cache=CacheState(cache),
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


def test_unknown_content_never_matches_and_is_refetched_on_the_degraded_rhythm():
    """A tag issued when the cache held no content for the part (its tags lost, not made
    again yet) says nothing of the data: it never matches, and it is refetched every
    degraded TTL, not every min TTL (a source that lags makes no tags, and a part with no
    tag fetched every 2 s tripled its upstream's calls in the simulation's seed 40183)."""
    assert not needed(tag(None, 2_000), "v1")
    assert not needed(tag(None, 2_000), None)
    assert needed(tag(None, 10_000), "v1")
    assert needed(tag(None, 10_000), None)
    assert needed(tag(None, 2_000), "v1", force=True)


def needed_from(
    client: ClientTag | None,
    stored: str | None,
    *,
    static: bool = False,
    force: bool = False,
    cache: bool = True,
) -> int | None:
    return part_needed_from_ms(
        rule(static=static), client, stored, force=force, cache=CacheState(cache), timings=T
    )


def test_one_rule_gives_the_moment_a_part_is_needed_from():
    """Each rule as a moment: needed now, from when a TTL passes, or not by time alone."""
    young = tag("v1", 500)
    # 1. missing or invalid: needed now
    assert needed_from(None, "v2") == AT_ONCE_MS
    # 2. static: never by time alone
    assert needed_from(young, "v2", static=True) is None
    # 3. the tag store unavailable: once c is 10 s old, force ignored
    assert needed_from(young, None, cache=False) == young.issued_ms + 10_000
    assert needed_from(young, None, cache=False, force=True) == young.issued_ms + 10_000
    # 4. unchanged: never by time alone, even forced
    assert needed_from(young, "v1") is None
    assert needed_from(young, "v1", force=True) is None
    # 5. changed: once c is at least 2 s old, or now if forced
    assert needed_from(young, "v2") == young.issued_ms + 2_000
    assert needed_from(young, "v2", force=True) == AT_ONCE_MS
    # a c that carries no content: once 10 s old, not 2 s
    assert needed_from(tag(None, 500), "v2") == NOW - 500 + 10_000


def test_a_part_is_needed_from_its_moment_and_a_waiting_poll_answers_at_that_moment():
    """Rule 5's min TTL, as a poll sees it and as a waiting poll is told when to answer: the
    part is not needed a millisecond before the moment it is due at, and needed at it."""
    cases = [
        (tag("v1", 500), "v2"),  # changed, 0.5 s old
        (tag(None, 500), "v2"),  # unknown content
        (ClientTag(V, None, NOW - 500, degraded=True), "v1"),  # degraded, the cache back
        (tag("v1", 60_000), new_content_tag(created=True, now_ms=NOW - 1_000)),  # made again
    ]
    for client, stored in cases:
        due = part_due_at_ms(
            rule(), client, stored, force=False, cache=CACHE_UP, timings=T, refetch_phase=0.5
        )
        assert due is not None and due > NOW, (client, stored)

        def needed_at(now_ms: int, client: ClientTag = client, stored: str = stored) -> bool:
            return part_needed(
                rule(),
                client,
                stored,
                force=False,
                cache=CACHE_UP,
                now_ms=now_ms,
                timings=T,
                refetch_phase=0.5,
            )

        assert not needed_at(due - 1), (client, stored)
        assert needed_at(due), (client, stored)


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
        cache=CACHE_UP,
        now_ms=NOW,
        timings=T,
    )
    assert decision.need_request == ["fast_info", "chat", "slow"]
    assert decision.valid_tags == {"fast_info": good}


def test_parts_polled_by_route_rules_are_never_in_need_request():
    route = rule("route", polling=PollingType.ROUTE_DISTANCE_DEPENDED, priority=5)
    decision = decide_parts(
        [route], V, {}, None, force=False, cache=CACHE_UP, now_ms=NOW, timings=T
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
        cache=CACHE_UP,
        now_ms=NOW,
        timings=T,
    )
    assert decision.need_request == []
    # the earlier of the two: chat's tag, issued 1.5 s ago, is 2 s old in 0.5 s
    assert decision.due_at_ms == NOW + 500


def test_nothing_is_held_back_when_content_matches_forced_or_the_cache_is_down():
    matching = {"fast_info": encode_tag(V, "v1", NOW - 500)}
    for stored, force, cache in [("v1", False, True), ("v2", True, True), ("v2", False, False)]:
        decision = decide_parts(
            [rule("fast_info")],
            V,
            matching,
            {"fast_info": stored},
            force=force,
            cache=CacheState(cache),
            now_ms=NOW,
            timings=T,
        )
        assert decision.due_at_ms is None, (stored, force, cache)


def degraded_needed(client: ClientTag, *, since_ms: int, phase: float, now_ms: int = NOW) -> bool:
    return part_needed(
        rule(),
        client,
        None,
        force=False,
        cache=CacheState.down(since_ms),
        now_ms=now_ms,
        timings=T,
        refetch_phase=phase,
    )


def test_rule3_a_tag_from_before_the_outage_is_refetched_at_its_orders_moment_in_the_ttl():
    # an outage began 1 s ago; the tag is an hour old: without spreading, every such tag
    # would be needed at once. An order at phase 0.3 waits until 3 s into the outage.
    since = NOW - 1_000
    old = tag("v1", 3_600_000)
    assert not degraded_needed(old, since_ms=since, phase=0.3)
    assert not degraded_needed(old, since_ms=since, phase=0.3, now_ms=since + 2_999)
    assert degraded_needed(old, since_ms=since, phase=0.3, now_ms=since + 3_000)
    # phase 0 is due at the outage's first moment
    assert degraded_needed(old, since_ms=since, phase=0.0)


def test_rule3_the_fleets_first_refetches_of_an_outage_are_spread_evenly_over_the_ttl():
    since = NOW
    old = tag("v1", 3_600_000)
    phases = [i / 1000 for i in range(1000)]
    due_per_second = [
        sum(
            degraded_needed(old, since_ms=since, phase=p, now_ms=since + s * 1000 + 999)
            for p in phases
        )
        for s in range(10)
    ]
    # each second of the TTL adds a tenth of the orders; after the TTL, all of them
    assert [b - a for a, b in zip([0, *due_per_second], due_per_second, strict=False)] == [100] * 10


def test_rule3_a_tag_issued_during_the_outage_follows_the_degraded_ttl_alone():
    since = NOW - 60_000
    degraded = ClientTag(V, None, NOW - 9_999, degraded=True)
    assert not degraded_needed(degraded, since_ms=since, phase=0.9)
    assert degraded_needed(
        ClientTag(V, None, NOW - 10_000, degraded=True), since_ms=since, phase=0.9
    )
    # a content tag issued after the outage began (by a replica whose cache read worked)
    assert degraded_needed(tag("v1", 10_000), since_ms=since, phase=0.9)


def test_rule3_never_more_than_one_refetch_per_ttl_whatever_the_phase():
    # a tag issued 9.999 s ago, 5 s before the outage began: its order's moment has come,
    # but not its TTL
    since = NOW - 4_999
    for phase in (0.0, 0.5, 0.99):
        assert not degraded_needed(tag("v1", 9_999), since_ms=since, phase=phase)


def test_after_the_cache_returns_a_degraded_tag_waits_for_the_degraded_ttl_not_the_min_ttl():
    young = ClientTag(V, None, NOW - 9_999, degraded=True)
    old = ClientTag(V, None, NOW - 10_000, degraded=True)
    assert not needed(young, "v1")
    assert needed(old, "v1")
    # force (after a user change) still skips it
    assert needed(young, "v1", force=True)
    # a waiting poll answers when its TTL has passed
    held = part_due_at_ms(rule(), young, "v1", force=False, cache=CACHE_UP, timings=T)
    assert held == young.issued_ms + 10_000


def test_a_tag_issued_while_the_cache_was_down_says_so_and_decodes_back():
    issued = encode_tag(V, None, NOW, degraded=True)
    assert issued.endswith(".~")
    assert decode_tag(issued) == ClientTag(V, None, NOW, degraded=True)
    assert decode_tag(encode_tag(V, None, NOW)) == ClientTag(V, None, NOW, degraded=False)


def test_each_order_has_one_fixed_refetch_phase_and_the_fleets_are_spread_evenly():
    assert refetch_phase("taxi", "o1") == refetch_phase("taxi", "o1")
    assert refetch_phase("taxi", "o1") != refetch_phase("eats", "o1")
    tenths = Counter(int(refetch_phase("taxi", f"order-{i}") * 10) for i in range(10_000))
    assert set(tenths) == set(range(10))
    assert all(900 <= count <= 1100 for count in tenths.values()), tenths


def test_tags_lost_and_created_again_are_refetched_at_the_orders_moment_not_all_at_once():
    # Redis came back empty 1 s ago: the poll created a new tag for the part; the client's
    # tag differs because the tags were lost, not the data
    created = new_content_tag(created=True, now_ms=NOW - 1_000)
    assert created_at_ms(created) == NOW - 1_000
    old = tag("v1", 60_000)

    def due(phase: float, now_ms: int) -> bool:
        return part_needed(
            rule(),
            old,
            created,
            force=False,
            cache=CACHE_UP,
            now_ms=now_ms,
            timings=T,
            refetch_phase=phase,
        )

    assert not due(0.5, NOW)  # due 5 s after the creation
    assert due(0.5, NOW + 4_000)
    assert due(0.0, NOW)
    held = part_due_at_ms(
        rule(), old, created, force=False, cache=CACHE_UP, timings=T, refetch_phase=0.5
    )
    assert held == NOW + 4_000
    # force (after a user change) still skips the wait
    assert part_needed(
        rule(), old, created, force=True, cache=CACHE_UP, now_ms=NOW, timings=T, refetch_phase=0.5
    )


def test_tags_made_again_with_the_orders_version_need_nothing_the_app_holds_at_it():
    """Tags lost and made again carry the order's version (`v<version>`, as its source listed
    it): a part the app holds at that version is unchanged (rule 4), not refetched."""
    assert made_tag(17) == "v17"
    assert not part_needed(
        rule(), tag("v17", 60_000), made_tag(17), force=False, cache=CACHE_UP, now_ms=NOW, timings=T
    )


def test_tags_made_again_with_a_version_the_app_lacks_are_refetched_at_the_orders_moment():
    """The app holds the part at v16, the order is at v17 and its tags were lost and made
    again 1 s ago: the app's tag is older than the order's tags, so they were made again
    (they say no time of their own): the part is due at the order's moment in the degraded
    TTL after they were made, not at once with every other order's."""
    made_ms = NOW - 1_000
    old = tag("v16", 60_000)

    def due_at(phase: float) -> int | None:
        return part_due_at_ms(
            rule(),
            old,
            made_tag(17),
            force=False,
            cache=CACHE_UP,
            timings=T,
            refetch_phase=phase,
            tags_made_ms=made_ms,
        )

    assert due_at(0.5) == made_ms + 5_000
    assert due_at(0.0) == made_ms  # the first moment of the spread: when they were made
    assert not part_needed(
        rule(),
        old,
        made_tag(17),
        force=False,
        cache=CACHE_UP,
        now_ms=NOW,
        timings=T,
        refetch_phase=0.5,
        tags_made_ms=made_ms,
    )


def test_a_change_after_the_orders_tags_were_written_is_due_after_the_min_ttl_alone():
    """An app's tag issued after the order's tags were first written (a new order's parts,
    fetched after its poll made them) and a change since: rule 5's min TTL, no spread."""
    made_ms = NOW - 30_000
    fetched = tag("v16", 25_000)
    assert (
        part_due_at_ms(
            rule(),
            fetched,
            "v17",
            force=False,
            cache=CACHE_UP,
            timings=T,
            refetch_phase=0.9,
            tags_made_ms=made_ms,
        )
        == fetched.issued_ms + T.min_ttl_ms
    )


def test_a_tag_bumped_by_a_change_is_due_after_the_min_ttl_as_before():
    bumped = new_content_tag(now_ms=NOW - 1_000)
    assert created_at_ms(bumped) is None
    assert part_needed(
        rule(),
        tag("v1", 2_000),
        bumped,
        force=False,
        cache=CACHE_UP,
        now_ms=NOW,
        timings=T,
        refetch_phase=0.99,
    )

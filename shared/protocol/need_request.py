"""Which parts of an order the client must fetch (docs/protocol.md: Tags and need_request)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.policy import PartRule
from shared.protocol.tags import ClientTag, created_at_ms, valid_tag


@dataclass(frozen=True)
class TagTimings:
    """The protocol's TTLs; the settings (ProtocolSettings: min_ttl_s, degraded_min_ttl_s)
    read their defaults from here."""

    # need_request rule 5: a part that changes many times a second is refetched at most this
    # often (the protocol's figure)
    min_ttl_ms: int = 2000
    # need_request rule 3: with the tag cache down, at most one fetch per order and part this
    # often (the protocol's figure)
    degraded_min_ttl_ms: int = 10_000


@dataclass(frozen=True)
class CacheState:
    """What a poll knows of the tag cache: whether it answered, and since when this process
    has found it unavailable (unix ms; its outage's start, for spreading refetches)."""

    available: bool
    unavailable_since_ms: int = 0

    @classmethod
    def down(cls, since_ms: int = 0) -> CacheState:
        return cls(False, since_ms)


CACHE_UP = CacheState(available=True)


# the moment a part needed at once is needed from: any moment now is past it
AT_ONCE_MS = 0


def part_needed_from_ms(
    rule: PartRule,
    client_tag: ClientTag | None,
    stored_content: str | None,
    *,
    force: bool,
    cache: CacheState,
    timings: TagTimings,
    refetch_phase: float = 0.0,
    tags_made_ms: int | None = None,
) -> int | None:
    """The five rules, in the protocol's order, for one tag_defined part: the moment (unix
    ms) from which the part is needed, AT_ONCE_MS if it is needed now whatever the time, None
    if no passing of time alone makes it needed. `refetch_phase` (in [0, 1), fixed per order)
    places the order's first refetch of an outage in the degraded TTL after the outage
    began; `tags_made_ms`: when a create made the order's stored tags, the order having none
    (unix ms), if it did."""
    # 1. missing or invalid client tag
    if client_tag is None:
        return AT_ONCE_MS
    # 2. static data never changes
    if rule.static:
        return None
    degraded_due = client_tag.issued_ms + timings.degraded_min_ttl_ms
    # 3. tag cache unavailable: force is ignored, only the degraded TTL refetches
    if not cache.available:
        if client_tag.degraded or client_tag.issued_ms >= cache.unavailable_since_ms:
            # issued during this outage, at moments already spread: the degraded rhythm
            return degraded_due
        # issued before the outage: most such tags are older than the TTL, and would all be
        # needed at its first moment; each order's turn comes at its own phase instead
        return max(
            degraded_due,
            cache.unavailable_since_ms + int(refetch_phase * timings.degraded_min_ttl_ms),
        )
    # 4. unchanged content
    if client_tag.content is not None and client_tag.content == stored_content:
        return None
    # force (after a user change): a changed part, or one of unknown content, is needed now
    if force:
        return AT_ONCE_MS
    if client_tag.degraded or client_tag.content is None:
        # issued while the cache was down, or when it held no content for the part (its tags
        # lost and not made again yet: a source that lags makes none): unknown content, not
        # changed content. Refetched on the degraded rhythm, so the cache's return costs one
        # degraded TTL of refetches, spread as the tags were issued, not everything 2 s after
        # it, and a part with no tag costs its upstream no call per min TTL
        return degraded_due
    # 5. changed: once the min TTL has passed
    return _changed_due_ms(client_tag, stored_content, timings, refetch_phase, tags_made_ms)


def part_needed(
    rule: PartRule,
    client_tag: ClientTag | None,
    stored_content: str | None,
    *,
    force: bool,
    cache: CacheState,
    now_ms: int,
    timings: TagTimings,
    refetch_phase: float = 0.0,
    tags_made_ms: int | None = None,
) -> bool:
    """Whether the part is needed now (part_needed_from_ms's moment has come)."""
    needed_from = part_needed_from_ms(
        rule,
        client_tag,
        stored_content,
        force=force,
        cache=cache,
        timings=timings,
        refetch_phase=refetch_phase,
        tags_made_ms=tags_made_ms,
    )
    return needed_from is not None and now_ms >= needed_from


def part_due_at_ms(
    rule: PartRule,
    client_tag: ClientTag | None,
    stored_content: str | None,
    *,
    force: bool,
    cache: CacheState,
    timings: TagTimings,
    refetch_phase: float = 0.0,
    tags_made_ms: int | None = None,
) -> int | None:
    """When a part that a TTL holds back (rule 5, or a degraded tag after the cache's return;
    not forced) becomes needed; None for a part no passing of time alone makes needed, and
    while the cache is down (no poll waits then). A waiting poll answers then."""
    needed_from = part_needed_from_ms(
        rule,
        client_tag,
        stored_content,
        force=force,
        cache=cache,
        timings=timings,
        refetch_phase=refetch_phase,
        tags_made_ms=tags_made_ms,
    )
    return _held_until(needed_from, cache)


def _held_until(needed_from_ms: int | None, cache: CacheState) -> int | None:
    if needed_from_ms == AT_ONCE_MS or not cache.available:
        return None
    return needed_from_ms


# a client tag issued this long before a create made the order's tags is older than them: more
# than any clock skew between a BFF and Redis, less than a poll
MADE_AGAIN_MARGIN_MS = 1000


def _changed_due_ms(
    client_tag: ClientTag,
    stored_content: str | None,
    timings: TagTimings,
    refetch_phase: float,
    tags_made_ms: int | None = None,
) -> int:
    """When a changed part is due (rule 5). A stored tag that was created because the order
    had none differs from the client's because the tags were lost (Redis came back empty,
    or they expired), not because the data changed: it is due at the order's own moment in
    the degraded TTL after the creation, so that losing every tag at once is no burst. Such a
    tag says when it was made (`n<ms>`), or, made with the order's version (`v<version>`), is
    told by the client's tag being older than the create that made the order's tags
    (`tags_made_ms`): an app holds a tag of an order from before its tags were made only if
    they were lost and made again."""
    due = client_tag.issued_ms + timings.min_ttl_ms
    created = created_at_ms(stored_content)
    if (
        created is None
        and tags_made_ms is not None
        and client_tag.issued_ms < tags_made_ms - MADE_AGAIN_MARGIN_MS
    ):
        created = tags_made_ms
    if created is not None and client_tag.content is not None:
        due = max(due, created + int(refetch_phase * timings.degraded_min_ttl_ms))
    return due


@dataclass(frozen=True)
class PartsDecision:
    need_request: list[str]
    # the client's tags that are valid, echoed back
    valid_tags: dict[str, str]
    # the earliest moment a part not needed now becomes needed by the min TTL alone
    due_at_ms: int | None = None


def decide_parts(
    rules_by_priority: Sequence[PartRule],
    policy_version: str,
    tags: Mapping[str, str],
    stored_tags: Mapping[str, str] | None,
    *,
    force: bool,
    cache: CacheState,
    now_ms: int,
    timings: TagTimings,
    refetch_phase: float = 0.0,
    tags_made_ms: int | None = None,
) -> PartsDecision:
    """need_request (by ascending priority) and the valid client tags of one actual order."""
    need: list[str] = []
    valid: dict[str, str] = {}
    due: list[int] = []
    for rule in rules_by_priority:
        tag = tags.get(rule.part_name)
        client_tag = valid_tag(tag, policy_version, now_ms)
        if client_tag is not None and tag is not None:
            valid[rule.part_name] = tag
        if not rule.tag_defined:
            continue
        stored_content = stored_tags.get(rule.part_name) if stored_tags else None
        needed_from = part_needed_from_ms(
            rule,
            client_tag,
            stored_content,
            force=force,
            cache=cache,
            timings=timings,
            refetch_phase=refetch_phase,
            tags_made_ms=tags_made_ms,
        )
        if needed_from is not None and now_ms >= needed_from:
            need.append(rule.part_name)
            continue
        due_at = _held_until(needed_from, cache)
        if due_at is not None:
            due.append(due_at)
    return PartsDecision(need, valid, min(due, default=None))

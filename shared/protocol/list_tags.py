"""List tags (docs/protocol.md: List tags): when a poll may take a source's kept answer
instead of asking the source, and when a known order its source does not list yet is kept
for a grace. Pure, no I/O."""

from __future__ import annotations


def kept_answer_usable(
    current_tag: str | None,
    kept_tag: str | None,
    kept_at_ms: int | None,
    *,
    now_ms: int,
    max_age_ms: int,
) -> bool:
    """A source's kept answer stands for asking it when it was kept under the list tag the
    tag cache holds now (the source bumps that tag on every change of its list) and is younger
    than `list_max_age`: a source that failed to bump is asked again within that age."""
    if current_tag is None or kept_tag is None or kept_at_ms is None:
        return False
    if kept_tag != current_tag:
        return False
    return 0 <= now_ms - kept_at_ms < max_age_ms


def within_created_grace(created_ms: int | None, *, now_ms: int, grace_ms: int) -> bool:
    """A known order its (available) source does not list is kept, stale, while its tags
    were first written less than `created_grace` ago: a source that lags behind order
    creation must not make a just-created order vanish. Past the grace it has finished."""
    if created_ms is None:
        return False
    return now_ms - created_ms < grace_ms

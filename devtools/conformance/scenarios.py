"""The scenarios, by name, in the order the kit runs them: each makes the stack do one thing
the contract speaks of, for a user of its own, while the client under test runs, and waits
(bounded) until the client has done what follows from it. What a scenario finds wrong beyond
the general checks, it returns in words."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from devtools.conformance import flow, outages, user_changes
from devtools.conformance.kit import Kit

Scenario = Callable[[Kit], Awaitable[list[str]]]
SCENARIOS: dict[str, Scenario] = {
    "a new order": flow.new_order,
    "a status change": flow.status_change,
    "a required and a slow part": flow.parts_one_slow,
    "a part error and its backoff": flow.part_error_and_backoff,
    "a source down: stale, echo": outages.source_down,
    "the tag cache down": outages.tag_cache_down,
    "a user change: conflict, force until seen": user_changes.versioned_conflict,
    "a last-write-wins change past its deadline": user_changes.last_write_wins_deadline,
    "a policy change": outages.policy_change,
    "the route by distance": flow.route_by_distance,
    "a 503 with Retry-After": outages.retry_after,
    "an app restart": outages.app_restart,
}

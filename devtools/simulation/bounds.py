"""The bounds the invariants are checked against: the protocol's settings, how long a look,
a part fetch and a client may take, and the load windows."""

from __future__ import annotations

from devtools.simulation.bff import SETTINGS
from devtools.simulation.upstreams import PART_TIMEOUT_S, SOURCE_DEADLINE_S
from shared.protocol.list_tags import KEPT_AGE_SPREAD_FROM

LIST_MAX_AGE_S = SETTINGS.list_max_age_s
MIN_TTL_S = SETTINGS.min_ttl_s
# a waiting poll held from its client's last look (the watch cache) misses a change whose
# wake-up was lost until a full look, at most this long after that look
KEPT_LOOK_S = KEPT_AGE_SPREAD_FROM * LIST_MAX_AGE_S
DEGRADED_TTL_S = SETTINGS.degraded_min_ttl_s
# a known order its source does not list is kept (stale) this long after its tags were made,
# while they exist
CREATED_GRACE_S = SETTINGS.created_grace_s
FORCE_PER_MINUTE = SETTINGS.force_per_order_per_minute
TAGS_DEADLINE_S = SETTINGS.tags_deadline_s
# one look at its longest: the tag read (behind the joined reads in flight), the sources, the
# read of new orders' tags and their creation, and the network both ways
ONE_LOOK_S = SOURCE_DEADLINE_S + 5 * TAGS_DEADLINE_S + 0.05
# one order's part fetch at its longest: an attempt timed out and its retry
ONE_PART_FETCH_S = 2 * PART_TIMEOUT_S + 0.05
# a look, then the part fetch at its longest (one retry), and the network: what a client needs
# after the poll that tells it of a change to hold it
SEEN_WITHIN_S = 2 * ONE_LOOK_S + 2 * PART_TIMEOUT_S + 0.5
SERVICES = ("taxi", "eats", "grocery")
# a whole document's upstreams
HEAVY = frozenset({"totw", "eats_full", "grocery_full"})
PERFORMER = "orderperformerinfo"
# each taxi part's own service (the default policy's), by the part it serves: each bounded by
# the legacy twins' totw calls (each of which asked every one of them once), as the performer
# info service is
PART_SERVICES = {
    "fast_info": "order_core",
    "rarely_changed": "order_settings",
    "static": "order_static",
    "chat": "orderchat",
    "slow": PERFORMER,
}
WINDOW_S = 5.0
# more polls than this in one window is a client in a loop (a burst of changes gives a few)
SPIN_POLLS = 12

"""The ways to run a seed other than the default (tests/simulation/README.md: Known
failures, and the exploration with the watch cache off)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    """Ways to run a seed other than the default: each puts back a behaviour the contract
    leaves open that the simulation found to fail (tests/simulation/README.md: Known
    failures)."""

    # lagging replicas answer no list tag for data they have none for (as the emulator's)
    untagged_replicas: bool = False
    # clients poll again at once after a part answered `expired` (as the reference client)
    at_once_after_expired: bool = False
    # waiting re-polls held from their client's last look (the watch cache, on by default as
    # in the services: docs/protocol.md, Waiting poll); the invariants allow what the cache
    # costs a wake-up lost on a live connection. Off (`--no-watch-cache`): every waiting poll
    # looks, as while ORDERS_STATE_WATCH_CACHE is false
    watch_cache: bool = True
    # the balancer sprays (each request to the next replica) instead of routing by user: the
    # per-process memos and coalescing see a share of a user's requests each
    spraying_router: bool = False
    # a writer whose tag write fails (the store down or paused) drops it instead of keeping
    # it and retrying until it lands (docs/protocol.md: Feature data and user changes)
    lossy_writers: bool = False


DEFAULT_OPTIONS = Options()

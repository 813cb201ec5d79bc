"""Admission control (SPEC: Polling interval): past a hard cap of polls in progress per
process, a poll is answered at once with 503 and Retry-After, so admitted polls stay fast
and never answer "source unavailable" because of the BFF's own queue."""

from __future__ import annotations

import random


def admitted(in_flight: int, max_in_flight: int) -> bool:
    """Whether one more poll may start while `in_flight` are in progress."""
    return in_flight < max_in_flight


def retry_after_s(base_s: int, rng: random.Random) -> int:
    """Retry-After in whole seconds (as HTTP has it): from `base_s` to twice it, so clients
    shed together do not all come back in the same second."""
    return rng.randint(base_s, 2 * base_s)

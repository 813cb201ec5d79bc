"""ETag and 304 of orders/state (docs/protocol.md: Polling orders): an answer's ETag is a
hash of its body, and a poll that names it in If-None-Match gets 304 Not Modified, with no
body. Pure, no I/O."""

from __future__ import annotations

import hashlib


def body_etag(body: bytes) -> str:
    """A strong validator of the answer's body: 128 bits of BLAKE2b, quoted."""
    return f'"{hashlib.blake2b(body, digest_size=16).hexdigest()}"'


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """The client holds this answer already: `If-None-Match` names its ETag (one of a list,
    or `*`; a weak `W/` form of it counts, as RFC 9110's weak comparison says)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == etag:
            return True
    return False

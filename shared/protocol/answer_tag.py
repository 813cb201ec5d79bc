"""`answer_tag` of orders/state (docs/protocol.md: Polling orders): every 200 carries a digest
of the rest of its answer; a poll that sends back the tag of the answer it holds, and whose
answer would be the same, gets `204 No Content` instead of the body. orders/state is a POST,
so this is no HTTP conditional request: no ETag, no 304 (RFC 9110 §13.1.2 gives a non-GET a
412 there, and stock clients take a 304 for an error). Pure, no I/O."""

from __future__ import annotations

import base64
import hashlib

# what the digest's 8 bytes are in unpadded base64url: a request naming a longer tag names
# none the server gave (the request type refuses one past MAX_ANSWER_TAG_LENGTH)
ANSWER_TAG_LENGTH = 11
# room for a longer digest later without a client change; a bound all the same, since a
# request field is read before anything else is known of it
MAX_ANSWER_TAG_LENGTH = 64


def answer_tag(answer: bytes) -> str:
    """A digest of an answer's encoded body (its answer_tag left out): 64 bits of BLAKE2b in
    unpadded base64url. A client holds one answer's tag and compares it with the next
    answer's, so two answers of its own are confused 1 time in 2**64; more bits would be paid
    twice on every poll (in the answer, then in the next request, over a mobile network).
    URL-safe, so a client may keep it wherever it keeps strings, and needs no escaping in
    JSON."""
    digest = hashlib.blake2b(answer, digest_size=8).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def nothing_new(held: str | None, current: str) -> bool:
    """The client holds this very answer: the tag it sent is the current answer's. No tag
    sent, or another one (an older answer's, or one this server never gave), is answered in
    full: the answer in full is never wrong."""
    return held is not None and held == current

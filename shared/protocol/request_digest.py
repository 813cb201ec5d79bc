"""The digest request of orders/state (docs/protocol.md: Polling orders, The digest request):
a client whose next body is byte for byte the body it sent last may send
`{"request_digest": "<d>"}` instead, `d` the digest of that previous body's bytes (before any
Content-Encoding). The server keeps the parsed poll of each user's last few full bodies and
answers a digest it holds as the body it stands for; one it does not hold is an error, and the
client sends the full body at once. Pure, no I/O: the client and the server compute it alike."""

from __future__ import annotations

import base64
import hashlib

# 16 bytes of SHA-256 in unpadded base64url. More than answer_tag's 8: a digest names a whole
# request the server then answers as if it had been sent, and the server compares it among
# every kept body of the user's devices, not one held answer. SHA-256 because every client
# platform has it built in (WebCrypto's crypto.subtle has no BLAKE2)
REQUEST_DIGEST_BYTES = 16
REQUEST_DIGEST_LENGTH = 22
REQUEST_DIGEST_PATTERN = r"^[A-Za-z0-9_-]{22}$"


def request_digest(body: bytes) -> str:
    """The digest of a full orders/state body, its bytes as the JSON the client encoded (a
    gzipped body's, before the gzip)."""
    digest = hashlib.sha256(body).digest()[:REQUEST_DIGEST_BYTES]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


# a digest request's body begins so, as both reference clients encode it (JSON's dumps and
# JSON.stringify put the field first, alone): what counters and recorders tell it by
DIGEST_BODY_START = b'{"request_digest"'


def is_digest_request(body: bytes) -> bool:
    """A body sent as a digest request, not in full (counted and replayed as its own kind)."""
    return body.lstrip().startswith(DIGEST_BODY_START)

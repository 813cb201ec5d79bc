"""The digest of a full orders/state body (docs/protocol.md: The digest request): the first 16
bytes of SHA-256 of the body's bytes, in unpadded base64url; what both clients compute."""

from __future__ import annotations

import base64
import hashlib
import re

from shared.protocol.request_digest import (
    REQUEST_DIGEST_LENGTH,
    REQUEST_DIGEST_PATTERN,
    request_digest,
)


def test_the_digest_is_the_first_16_bytes_of_sha256_in_unpadded_base64url():
    body = b'{"known_orders": [], "wait_ms": 20000}'
    digest = request_digest(body)
    assert len(digest) == REQUEST_DIGEST_LENGTH and "=" not in digest
    assert base64.urlsafe_b64decode(digest + "==") == hashlib.sha256(body).digest()[:16]
    assert re.fullmatch(REQUEST_DIGEST_PATTERN, digest)


def test_a_byte_more_is_another_digest():
    # the digest is of bytes, not of JSON's meaning: a space makes another body
    assert request_digest(b'{"wait_ms":0}') != request_digest(b'{"wait_ms": 0}')
    # a known value, to check another client's implementation against
    assert request_digest(b"{}") == "RBNvo1WzZ4oRRq0W9-hkng"

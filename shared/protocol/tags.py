"""The client tag codec. A tag is opaque to the client; the server encodes in it the
service's policy version, the content tag it had for the part when the data was fetched
(or none when it is unknown), and the time it was issued.

Format: `<policy_version>.<issued ms, base 36>.<content, base64url>`: URL-safe, at most
128 characters for a content tag of up to 64 characters. The content is `~` (not base64url,
so never a content) for a tag issued while the tag cache was unavailable: such a tag is
refetched on the degraded rhythm, also after the cache is back.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from shared.wire import CONTENT_TAG_PATTERN

MAX_ISSUED_TAG_LENGTH = 128
MAX_ACCEPTED_TAG_LENGTH = 256
# a tag issued further in the future than this is forged or from a broken clock
MAX_CLOCK_SKEW_MS = 60_000

_POLICY_VERSION = re.compile(r"^[0-9a-f]{4,16}$")
_ISSUED = re.compile(r"^[0-9a-z]{1,12}$")
DEGRADED_MARK = "~"
_CONTENT_TAG = re.compile(CONTENT_TAG_PATTERN)


CREATED_PREFIX = "n"
_CREATED = re.compile(r"^n([0-9a-f]{1,12})-")


def new_content_tag(*, created: bool = False, now_ms: int | None = None) -> str:
    """A content tag unique without coordination (milliseconds, then 48 random bits,
    URL-safe), so no client tag matches it by chance. `created`: for a part that had none
    (a new order, or one whose tags were lost): such a tag says when it was made, for a
    client tag that differs from it differs because the tags were lost, not the data."""
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    prefix = CREATED_PREFIX if created else "b"
    return f"{prefix}{millis:x}-{base64.urlsafe_b64encode(os.urandom(6)).decode()}"


def made_tag(version: int | None) -> str:
    """The content tag made for a part that has none (a new order, or one whose tags were
    lost): `v<version>` when its source gave the order's version (the content tag of the
    order's data at that version, as its features write them: an upstream gets the version it
    can use, and an app that holds the part at that version needs nothing), else a unique one
    that says when it was made."""
    if version is not None:
        return f"v{version}"
    return new_content_tag(created=True)


def new_content_tags(count: int) -> list[str]:
    """`count` content tags as `new_content_tag` makes them, with one clock read and one
    draw of random bytes for all: a read that makes a tag for each of its lists."""
    millis = int(time.time() * 1000)
    drawn = os.urandom(6 * count)
    return [
        f"b{millis:x}-{base64.urlsafe_b64encode(drawn[i : i + 6]).decode()}"
        for i in range(0, 6 * count, 6)
    ]


def created_at_ms(content_tag: str | None) -> int | None:
    """When a content tag made for a part that had none was made; None for any other."""
    if content_tag is None:
        return None
    match = _CREATED.match(content_tag)
    return int(match.group(1), 16) if match else None


@dataclass(frozen=True)
class ClientTag:
    policy_version: str
    # None: unknown when it was issued; equals no stored content tag
    content: str | None
    issued_ms: int
    # issued while the tag cache was unavailable (its content is None)
    degraded: bool = False


def encode_tag(
    policy_version: str, content: str | None, issued_ms: int, *, degraded: bool = False
) -> str:
    """A tag of at most 128 chars. A content tag too long to fit (order_tags only stores
    short URL-safe ones) is left out: unknown content never matches, so the part is fetched
    again later rather than the request failing now."""
    prefix = f"{policy_version}.{_base36(issued_ms)}."
    if degraded:
        return prefix + DEGRADED_MARK
    if not content:
        return prefix
    encoded = base64.urlsafe_b64encode(content.encode()).rstrip(b"=").decode()
    if len(prefix) + len(encoded) > MAX_ISSUED_TAG_LENGTH:
        return prefix
    return prefix + encoded


# clients resend the tags they were given, poll after poll, and one poll decodes each of its
# tags several times (validity, the versions a client holds, the content tags its sources
# get): a pure function of the string, whose answer (frozen) is shared
DECODED_TAGS_CACHED = 4096


@functools.lru_cache(maxsize=DECODED_TAGS_CACHED)
def decode_tag(tag: str) -> ClientTag | None:
    """The tag's parts, or None when it does not decode (an invalid tag)."""
    if len(tag) > MAX_ACCEPTED_TAG_LENGTH:
        return None
    pieces = tag.split(".")
    if len(pieces) != 3:
        return None
    policy_version, issued, encoded = pieces
    if not _POLICY_VERSION.match(policy_version) or not _ISSUED.match(issued):
        return None
    content: str | None = None
    if encoded == DEGRADED_MARK:
        return ClientTag(policy_version, None, int(issued, 36), degraded=True)
    if encoded:
        try:
            content = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        if not content:
            return None
    return ClientTag(policy_version, content, int(issued, 36))


def valid_tag(tag: str | None, policy_version: str, now_ms: int) -> ClientTag | None:
    """A client tag that decodes, is of the current policy version and is not from the
    future; None for a missing or invalid one."""
    if tag is None:
        return None
    client_tag = decode_tag(tag)
    if client_tag is None or client_tag.policy_version != policy_version:
        return None
    if client_tag.issued_ms > now_ms + MAX_CLOCK_SKEW_MS:
        return None
    return client_tag


def upstream_content_tags(tag: str | None, policy_version: str, now_ms: int) -> str | None:
    """What an upstream gets of the client's tag for a part: the content tag it holds (for
    taxi, the order_proc version such as `v17`), never the server's envelope (policy version,
    issue time). Upstream logic such as order_proc's version works on it.

    None when the client holds no content tag the upstream could know: no tag, an invalid
    one, one issued while the tag cache was down, or one whose content order_tags could never
    have stored (made up)."""
    client_tag = valid_tag(tag, policy_version, now_ms)
    if client_tag is None or client_tag.content is None:
        return None
    if not _CONTENT_TAG.match(client_tag.content):
        return None  # a made-up tag: order_tags never stored such a content
    return client_tag.content


def known_content_tags(tags: Mapping[str, str], policy_version: str, now_ms: int) -> dict[str, str]:
    """The content tags a client holds for an order's parts, by part, as an order source
    gets them: each valid tag of the version the client is answered by that carries one."""
    content_tags: dict[str, str] = {}
    for part, tag in tags.items():
        content_tag = upstream_content_tags(tag, policy_version, now_ms)
        if content_tag is not None:
            content_tags[part] = content_tag
    return content_tags


def refetch_phase(service: str, orderid: str) -> float:
    """Where in a degraded TTL an order's first refetch of an outage falls, in [0, 1):
    fixed per order, so all its parts fall together (one upstream call), and spread evenly
    over the fleet's orders, so an outage's start is no burst."""
    digest = hashlib.blake2b(f"{service}\x00{orderid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest) / 2**64


def _base36(value: int) -> str:
    if value < 0:
        raise ValueError("negative time")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if value == 0:
            return out

"""The tag codec: policy version, content tag and issue time; URL-safe, ≤ 128 chars."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from shared.policy import load_policy
from shared.protocol.tags import (
    ClientTag,
    decode_tag,
    encode_tag,
    known_content_tags,
    new_content_tag,
    new_content_tags,
    upstream_content_tags,
    valid_tag,
)
from shared.wire import CONTENT_TAG_PATTERN

NOW = 1_800_000_000_000
URL_SAFE = re.compile(r"^[A-Za-z0-9._~-]+$")

# a policy version other than the one under test: the deprecated taxi layout's
OTHER_VERSION = load_policy().services["taxi"].deprecated[0].policy_version


CONTENT_TAGS = st.from_regex(r"\A[A-Za-z0-9._:~-]{1,64}\Z")


@given(
    content=st.one_of(st.none(), CONTENT_TAGS),
    issued=st.integers(min_value=0, max_value=4_000_000_000_000),
)
def test_a_tag_carries_policy_version_content_and_issue_time(content: str | None, issued: int):
    tag = encode_tag("646d451553", content, issued)
    assert decode_tag(tag) == ClientTag("646d451553", content, issued)


@given(content=st.text(min_size=1, max_size=200))
def test_a_content_too_long_for_a_tag_becomes_unknown_never_an_error(content: str):
    tag = encode_tag("646d451553", content, NOW)
    assert len(tag) <= 128
    decoded = decode_tag(tag)
    assert decoded is not None and decoded.content in (content, None)


@given(content=CONTENT_TAGS)
def test_issued_tags_are_url_safe_and_at_most_128_chars(content: str):
    tag = encode_tag("646d451553", content, NOW)
    assert len(tag) <= 128
    assert URL_SAFE.match(tag)


def test_a_tag_that_does_not_decode_is_invalid():
    for garbage in ("", "x", "a.b", "646d451553.zz.!!", "646d451553..", "NOTHEX.1.YQ", "a.b.c.d"):
        assert valid_tag(garbage, "646d451553", NOW) is None


def test_a_tag_of_another_policy_version_is_invalid():
    tag = encode_tag(OTHER_VERSION, "v1", NOW)
    assert valid_tag(tag, "646d451553", NOW) is None
    assert valid_tag(tag, OTHER_VERSION, NOW) == ClientTag(OTHER_VERSION, "v1", NOW)


def test_a_missing_tag_is_invalid():
    assert valid_tag(None, "646d451553", NOW) is None


def test_a_tag_issued_in_the_future_is_invalid():
    tag = encode_tag("646d451553", "v1", NOW + 3_600_000)
    assert valid_tag(tag, "646d451553", NOW) is None


def test_tags_over_256_chars_are_not_accepted():
    tag = encode_tag("646d451553", "v1", NOW) + "A" * 300
    assert decode_tag(tag) is None


# docs/protocol.md: "the upstream gets the client's content tag for the part (the order_proc
# version v17), never the server's envelope"

VERSION = "646d451553"


def test_an_upstream_gets_the_content_tag_the_client_holds_not_the_envelope() -> None:
    tag = encode_tag(VERSION, "v17", NOW - 1000)
    assert upstream_content_tags(tag, VERSION, NOW) == "v17"


def test_a_part_of_a_served_older_version_sends_its_own_content_tag() -> None:
    # every part of every served version has a content tag of its own (feature services bump
    # them all), so an old client's tag means to the upstream what a current one's does
    tag = encode_tag(OTHER_VERSION, "v17", NOW - 1000)
    assert upstream_content_tags(tag, OTHER_VERSION, NOW) == "v17"


def test_an_upstream_gets_no_tag_where_the_client_holds_no_content_tag() -> None:
    assert upstream_content_tags(None, VERSION, NOW) is None
    assert upstream_content_tags("garbage", VERSION, NOW) is None
    of_another_version = encode_tag(OTHER_VERSION, "v17", NOW - 1000)
    assert upstream_content_tags(of_another_version, VERSION, NOW) is None
    issued_degraded = encode_tag(VERSION, None, NOW - 1000, degraded=True)
    assert upstream_content_tags(issued_degraded, VERSION, NOW) is None
    unknown_content = encode_tag(VERSION, None, NOW - 1000)
    assert upstream_content_tags(unknown_content, VERSION, NOW) is None
    made_up = encode_tag(VERSION, "no such content\n", NOW - 1000)
    assert upstream_content_tags(made_up, VERSION, NOW) is None


def test_an_order_source_gets_the_content_tag_of_each_part_the_client_holds_one_for() -> None:
    client_tags = {
        "fast_info": encode_tag(VERSION, "v17", NOW - 1000),
        "chat": encode_tag(VERSION, "b19a-xyz", NOW - 1000),
        "slow": encode_tag(VERSION, None, NOW - 1000, degraded=True),
        "static": "not a tag",
    }
    assert known_content_tags(client_tags, VERSION, NOW) == {
        "fast_info": "v17",
        "chat": "b19a-xyz",
    }


def test_content_tags_made_together_are_each_unique_and_of_one_tags_form() -> None:
    # a read makes one for each of its lists with one draw: no two alike, none like another
    # read's, each as new_content_tag makes it (the time, then 48 random bits)
    made = [tag for _ in range(50) for tag in new_content_tags(3)]
    assert len(set(made)) == len(made) == 150
    alone = new_content_tag()
    for tag in made:
        assert re.match(CONTENT_TAG_PATTERN, tag)
        assert len(tag) == len(alone) and tag[0] == alone[0] and "-" in tag
    assert new_content_tags(0) == []

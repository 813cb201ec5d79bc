"""docs/protocol.md: Polling orders: every orders/state 200 carries `answer_tag`, a digest of
the rest of the answer; a poll that sends back the tag of the answer it holds, and whose
answer would be the same, gets 204 No Content. Anything else is answered in full."""

from __future__ import annotations

import re

from shared.protocol.answer_tag import (
    ANSWER_TAG_LENGTH,
    MAX_ANSWER_TAG_LENGTH,
    answer_tag,
    nothing_new,
)


def test_the_same_answer_has_the_same_tag_and_another_answer_another():
    assert answer_tag(b'{"orders":[]}') == answer_tag(b'{"orders":[]}')
    assert answer_tag(b'{"orders":[]}') != answer_tag(b'{"orders":[1]}')


def test_a_tag_is_short_and_url_safe():
    # 64 bits: every poll pays its tag twice (in the answer, then in the next request)
    tags = [answer_tag(str(i).encode()) for i in range(1000)]
    assert all(len(tag) == ANSWER_TAG_LENGTH for tag in tags)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", tag) for tag in tags)
    # within the request's bound, with room for a longer digest later
    assert ANSWER_TAG_LENGTH < MAX_ANSWER_TAG_LENGTH


def test_the_tag_of_the_answer_held_is_nothing_new():
    current = answer_tag(b'{"orders":[]}')
    assert nothing_new(current, current)


def test_no_tag_or_another_is_answered_in_full():
    current = answer_tag(b'{"orders":[]}')
    assert not nothing_new(None, current)
    assert not nothing_new("", current)
    assert not nothing_new(answer_tag(b'{"orders":[1]}'), current)
    assert not nothing_new(current[:-1], current)

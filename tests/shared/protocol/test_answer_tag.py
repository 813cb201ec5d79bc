"""docs/protocol.md: Polling orders: orders/state answers carry an ETag of their body. A poll
whose If-None-Match names it (weak comparison, RFC 9110: a gateway that compresses turns it
into `W/"…"`) gets 304 Not Modified. `If-None-Match: *` is ignored (a poll has no "any current
representation")."""

from __future__ import annotations

from shared.protocol.etag import body_etag, not_modified, opaque_tags

ETAG = body_etag(b"{}")


def test_the_same_body_has_the_same_etag_and_another_body_another():
    assert body_etag(b'{"orders":[]}') == body_etag(b'{"orders":[]}')
    assert body_etag(b'{"orders":[]}') != body_etag(b'{"orders":[1]}')
    assert body_etag(b"{}").startswith('"') and body_etag(b"{}").endswith('"')
    # 64 bits: every poll pays its ETag twice (the answer's, then If-None-Match)
    assert len(body_etag(b"{}")) == len('""') + 16


def test_if_none_match_equal_to_the_etag_is_not_modified():
    assert not_modified(ETAG, ETAG)


def test_comparison_is_weak_the_w_form_a_compressing_gateway_hands_back_matches():
    assert not_modified(f"W/{ETAG}", ETAG)
    assert not_modified(f"  W/{ETAG}  ", ETAG)


def test_a_list_of_etags_is_not_modified_when_any_of_them_matches():
    assert not_modified(f'"a", W/"b", {ETAG}', ETAG)
    assert not_modified(f'"a",W/{ETAG}', ETAG)
    assert not_modified(f'"a",\t{ETAG},', ETAG)  # empty list members are allowed
    assert not not_modified('"a", W/"b"', ETAG)


def test_a_list_of_etags_is_read_as_rfc_9110_says():
    assert opaque_tags('"a", W/"b"') == ['"a"', '"b"']
    # a comma is an etagc: inside the quotes it is part of the tag, not a separator
    assert opaque_tags('"a,b", W/"c"') == ['"a,b"', '"c"']
    assert opaque_tags(", ,") == []
    assert opaque_tags("") == []


def test_if_none_match_star_is_ignored_a_poll_has_no_any_current_representation():
    assert not not_modified("*", ETAG)
    assert not not_modified(" * ", ETAG)


def test_a_value_that_is_no_list_of_etags_is_ignored():
    # a member that is not an entity-tag (`*` among others, an unquoted or unclosed tag, a
    # lower-case `w/`, two tags with no comma) makes the whole value malformed
    for malformed in (
        f"*, {ETAG}",
        ETAG[1:-1],
        f'"a", {ETAG[1:-1]}',
        f"w/{ETAG}",
        f'{ETAG} "a"',
        f'"a", {ETAG[:-1]}',
    ):
        assert opaque_tags(malformed) is None, malformed
        assert not not_modified(malformed, ETAG), malformed


def test_no_or_another_if_none_match_is_answered_in_full():
    assert not not_modified(None, ETAG)
    assert not not_modified("", ETAG)
    assert not not_modified('"other"', ETAG)
    assert not not_modified(f'W/"x{ETAG[1:]}', ETAG)

"""docs/protocol.md: Polling orders: orders/state answers carry an ETag of their body, and a
poll with If-None-Match equal to it gets 304."""

from __future__ import annotations

from shared.protocol.etag import body_etag, not_modified


def test_the_same_body_has_the_same_etag_and_another_body_another():
    assert body_etag(b'{"orders":[]}') == body_etag(b'{"orders":[]}')
    assert body_etag(b'{"orders":[]}') != body_etag(b'{"orders":[1]}')
    assert body_etag(b"{}").startswith('"') and body_etag(b"{}").endswith('"')


def test_if_none_match_naming_the_etag_is_not_modified():
    etag = body_etag(b"{}")
    assert not_modified(etag, etag)
    assert not_modified(f'"other", {etag}', etag)
    assert not_modified(f"W/{etag}", etag)
    assert not_modified("*", etag)


def test_no_or_another_if_none_match_is_answered_in_full():
    etag = body_etag(b"{}")
    assert not not_modified(None, etag)
    assert not not_modified("", etag)
    assert not not_modified('"other"', etag)

"""When the client polls next (docs/protocol.md: Polling interval, Waiting poll): the
interval every answer gives, never cached; at once after a waiting poll that waited or had
news; Retry-After after a 503; the fallback without an answer."""

from __future__ import annotations

from multidict import CIMultiDict

from client.timing import next_poll
from client.transport import Reply

FALLBACK_S = 2.0


def reply(status: int, headers: dict[str, str], body: dict | None = None) -> Reply:
    return Reply(status, {} if body is None and status == 200 else body, CIMultiDict(headers), 0)


def test_the_interval_of_every_answer_is_taken():
    assert next_poll(reply(200, {"X-Yataxi-Polling-Interval-Ms": "3000"}), FALLBACK_S) == (
        3.0,
        False,
    )


def test_without_the_header_the_fallback():
    assert next_poll(reply(200, {}), FALLBACK_S) == (FALLBACK_S, False)
    assert next_poll(reply(200, {"X-Yataxi-Polling-Interval-Ms": "soon"}), FALLBACK_S)[0] == 2.0


def test_a_waiting_poll_that_waited_or_had_news_goes_again_at_once():
    for cause in ("news", "wakeup", "timeout", "shutdown"):
        headers = {"X-Yataxi-Polling-Interval-Ms": "3000", "X-Mlutp-Wait": cause}
        assert next_poll(reply(200, headers), FALLBACK_S) == (3.0, True), cause
    for cause in ("unavailable", "shed"):
        headers = {"X-Yataxi-Polling-Interval-Ms": "6000", "X-Mlutp-Wait": cause}
        assert next_poll(reply(200, headers), FALLBACK_S) == (6.0, False), cause


def test_a_shed_poll_comes_back_after_retry_after():
    assert next_poll(reply(503, {"Retry-After": "7"}, {"code": "overloaded"}), FALLBACK_S) == (
        7.0,
        False,
    )


def test_a_shed_poll_spreads_its_return_over_the_second_after_retry_after():
    shed = reply(503, {"Retry-After": "2"}, {"code": "overloaded"})
    assert next_poll(shed, FALLBACK_S, spread_s=0.25) == (2.25, False)
    # the server's interval has its own jitter: nothing is added to it
    answered = reply(200, {"X-Yataxi-Polling-Interval-Ms": "3000"})
    assert next_poll(answered, FALLBACK_S, spread_s=0.25) == (3.0, False)


def test_no_answer_or_no_json_object_is_the_fallback():
    assert next_poll(Reply(0, None, CIMultiDict(), 0, refused=True), FALLBACK_S) == (2.0, False)
    garbage = Reply(200, None, CIMultiDict({"X-Mlutp-Wait": "news"}), 0)
    assert next_poll(garbage, FALLBACK_S) == (FALLBACK_S, False)

"""The one place the project touches aiohttp below its public API, each use checked by
tests/shared/test_aiohttp_internals.py, so that an aiohttp upgrade that moves one fails there
by name instead of silently disabling the read timeout.

- `newest_request_body`: the body stream of the request a connection is receiving now, from
  the handler's queue of parsed requests (`RequestHandler._messages`). aiohttp has no public
  hook for "the headers of a request have arrived"; the read timeout needs it.
- `stop_lingering` and `answered`: a request whose body is late is answered 408 by its
  handler's read, and its connection is then closed, not lingered on
  (`RequestHandler._lingering_time`); a body still arriving after its request was answered
  (the handler did not read it) ends the connection quietly. Either way aiohttp would
  otherwise read the late body's error in its lingering loop and log an ERROR with a
  traceback, once per slow client. Whether the handler is done with a request is
  `RequestHandler._request_in_progress` and the queue of parsed requests. aiohttp has no
  public hook for either.
- `BaseRunner._make_server` is the runners' abstract hook for the server they build, and the
  one way to give that server connections of our own handler class: `ServiceRunner`
  overrides it (shared.runner).
"""

from __future__ import annotations

from aiohttp import StreamReader, web


def newest_request_body(handler: web.RequestHandler) -> StreamReader | None:
    """The body of the last request whose headers the handler has parsed and not yet
    handled, if any."""
    messages = handler._messages
    return messages[-1][1] if messages else None


def parsed_request_count(handler: web.RequestHandler) -> int:
    return len(handler._messages)


def stop_lingering(handler: web.RequestHandler) -> None:
    """After its response, the handler closes the connection at once instead of reading the
    rest of a request body that has not arrived."""
    handler._lingering_time = 0.0


def answered(handler: web.RequestHandler, body: StreamReader) -> bool:
    """Whether the request whose body this is has been handled: it is neither being handled
    nor waiting in the queue of parsed requests."""
    if handler._request_in_progress:
        return False
    return all(queued is not body for _, queued in handler._messages)

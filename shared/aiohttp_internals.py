"""The one place the project touches aiohttp below its public API, each use checked by
tests/shared/test_aiohttp_internals.py, so that an aiohttp upgrade that moves one fails there
by name instead of silently disabling the read timeout.

- `newest_request_body`: the body stream of the request a connection is receiving now, from
  the handler's queue of parsed requests (`RequestHandler._messages`). aiohttp has no public
  hook for "the headers of a request have arrived"; the read timeout needs it.
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

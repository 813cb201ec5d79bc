"""The aiohttp internals shared.aiohttp_internals relies on are still there. An aiohttp
upgrade that moves one fails here, by name; the behaviour they carry (a request that does not
arrive in time gets a 408) is tested in tests/shared/test_web.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]


def test_the_aiohttp_these_checks_were_written_for_is_the_pinned_one():
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"aiohttp=={aiohttp.__version__}" in pins


def test_a_request_handler_queues_parsed_requests_with_their_bodies():
    # RequestHandler._messages: a deque of (RawRequestMessage, StreamReader), newest last.
    # That the newest is the one arriving is what test_web's late-body test measures (its
    # 408 is counted as a late body, not late headers, only if it is found).
    assert "_messages" in web.RequestHandler.__slots__


def test_a_request_handler_lingers_on_an_unread_body_for_its_lingering_time():
    # RequestHandler._lingering_time: how long start() reads the rest of a body the handler
    # left unread. That a slow body then ends with no traceback is what test_web measures
    assert "_lingering_time" in web.RequestHandler.__slots__
    # RequestHandler._request_in_progress: a handler runs for the connection's request
    assert "_request_in_progress" in web.RequestHandler.__slots__


def test_a_runner_builds_its_server_in_its_abstract_make_server_hook():
    assert "_make_server" in web.BaseRunner.__abstractmethods__
    assert "_make_server" in vars(web.AppRunner)

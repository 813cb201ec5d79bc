from __future__ import annotations

import urllib.parse
from pathlib import Path

import msgspec
from aiohttp import web

from demo.keys import SETTINGS, TAG_CACHE_SWITCH, UPSTREAMS
from demo.upstream import Kind, Passed
from demo.wire import DemoConfig, FaultName, FaultSwitch, NewOrder
from shared import wire
from shared.errors import BadRequest
from shared.web import checked_path, json_response, quoted_segments, read_json

STATIC = Path(__file__).resolve().parent / "static"
# legacy clients fetch totw for every order every 5 s (iOS; Android every 10 s)
LEGACY_INTERVAL_S = 5.0
# the emulator's fault each switch sets, on and off
EMULATOR_FAULTS = {
    FaultName.EATS_SOURCE: ("source:eats", "down"),
    FaultName.TOTW: ("totw", "error500"),
}

# the waiting poll, held up to 25 s: the demo passes it on through the polls' own pool
POLL_PATH = "/mlutp/v1/orders/state"

_new_order = msgspec.json.Decoder(NewOrder)
_fault_switch = msgspec.json.Decoder(FaultSwitch)


def _segments(request: web.Request, *names: str) -> list[str]:
    """Path parameters passed on as single path segments."""
    return quoted_segments([request.match_info[name] for name in names])


def _response(passed: Passed) -> web.Response:
    return web.Response(status=passed.status, body=passed.body, headers=passed.headers)


async def _pass_on(request: web.Request, url: str, kind: Kind = Kind.OTHER) -> web.Response:
    """The browser's request, body and headers as they came, to `url` as the demo user."""
    upstreams = request.app[UPSTREAMS]
    body = await request.read()
    return _response(await upstreams.call("POST", url, body, request.headers, kind))


def _mlutp_path(request: web.Request) -> str:
    """The path under /mlutp/ (the route's), as segments that stay under it."""
    return checked_path(request.rel_url.raw_path)


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def config(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    faults = [name.value for name in EMULATOR_FAULTS] if settings.fault_switches else []
    if request.app[TAG_CACHE_SWITCH] is not None:
        faults.insert(0, FaultName.TAG_CACHE.value)
    return json_response(DemoConfig(settings.user_id, LEGACY_INTERVAL_S, faults))


async def launch(request: web.Request) -> web.Response:
    """The page's launch, as the demo user (the demo server is the page's API gateway)."""
    url = f"{request.app[SETTINGS].launch_url}/4.0/launch"
    return await _pass_on(request, url, Kind.POLL)


async def orders_state(request: web.Request) -> web.Response:
    """orders/state and the part endpoints (everything under /mlutp/), as the demo user."""
    path = _mlutp_path(request)
    url = f"{request.app[SETTINGS].orders_state_url}{path}"
    return await _pass_on(request, url, Kind.POLL if path == POLL_PATH else Kind.OTHER)


async def create_order(request: web.Request) -> web.Response:
    body = await read_json(request, _new_order)
    settings = request.app[SETTINGS]
    created = {"user_id": settings.user_id, "service": body.service.value}
    url = f"{settings.emulator_url}/emulator/v1/orders"
    return _response(await request.app[UPSTREAMS].call("POST", url, wire.encode(created)))


async def advance(request: web.Request) -> web.Response:
    """The demo user's order's next status, as if time had passed (the emulator's control
    API, told the user: another user's order is not found)."""
    service, orderid = _segments(request, "service", "orderid")
    url = f"{request.app[SETTINGS].emulator_url}/emulator/v1/orders/{service}/{orderid}/advance"
    return _response(await request.app[UPSTREAMS].call("POST", url, b"{}"))


async def feature(request: web.Request) -> web.Response:
    """A user change through its feature service (comment, tips, cancel, ...)."""
    service, orderid, name = _segments(request, "service", "orderid", "feature")
    url = f"{request.app[SETTINGS].emulator_url}/emulator/v1/features/{service}/{orderid}/{name}"
    return await _pass_on(request, url)


async def set_fault(request: web.Request) -> web.Response:
    body = await read_json(request, _fault_switch)
    if body.fault is FaultName.TAG_CACHE:
        switch = request.app[TAG_CACHE_SWITCH]
        if switch is None:
            raise BadRequest(
                "the tag cache switch is only for a Redis the stack started itself",
                code="fault_unavailable",
            )
        await switch.set(down=body.on)
        return json_response({"fault": body.fault.value, "on": body.on})
    if not request.app[SETTINGS].fault_switches:
        # an emulator fault acts on the whole stack: only on a stack the demo's own run made
        raise BadRequest(
            "fault switches are only for a stack `mlutp run` started itself",
            code="fault_unavailable",
        )
    target, mode = EMULATOR_FAULTS[body.fault]
    fault = {"target": target, "mode": mode if body.on else "ok"}
    url = f"{request.app[SETTINGS].emulator_url}/emulator/v1/faults"
    passed = await request.app[UPSTREAMS].call("POST", url, wire.encode(fault))
    if passed.status != 200:
        return _response(passed)
    return json_response({"fault": body.fault.value, "on": body.on})


async def traffic(request: web.Request) -> web.Response:
    """Upstream calls and bytes the demo user's requests caused, counted by the emulator."""
    settings = request.app[SETTINGS]
    query = urllib.parse.urlencode({"user_id": settings.user_id})
    url = f"{settings.emulator_url}/emulator/v1/stats?{query}"
    return _response(await request.app[UPSTREAMS].call("GET", url))

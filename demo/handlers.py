from __future__ import annotations

import urllib.parse
from pathlib import Path

import msgspec
from aiohttp import web

from demo.keys import SETTINGS, TAG_CACHE_SWITCH, UPSTREAMS
from demo.upstream import Passed
from demo.wire import DemoConfig, FaultName, FaultSwitch, NewOrder
from shared import wire
from shared.errors import BadRequest
from shared.web import json_response, read_json

STATIC = Path(__file__).resolve().parent / "static"
# legacy clients fetch totw for every order every 5 s (iOS; Android every 10 s)
LEGACY_INTERVAL_S = 5.0
# the emulator's fault each switch sets, on and off
EMULATOR_FAULTS = {
    FaultName.EATS_SOURCE: ("source:eats", "down"),
    FaultName.TOTW: ("totw", "error500"),
}

_new_order = msgspec.json.Decoder(NewOrder)
_fault_switch = msgspec.json.Decoder(FaultSwitch)


def _segments(request: web.Request, *names: str) -> list[str]:
    """Path parameters passed on as single path segments, never as `.` or `..` (which a URL
    resolves to another path)."""
    values = [request.match_info[name] for name in names]
    if any(value in (".", "..") for value in values):
        raise BadRequest("a path parameter may not be . or ..")
    return [urllib.parse.quote(value, safe="") for value in values]


def _response(passed: Passed) -> web.Response:
    return web.Response(status=passed.status, body=passed.body, headers=passed.headers)


async def _pass_on(request: web.Request, url: str) -> web.Response:
    """The browser's request, body and headers as they came, to `url` as the demo user."""
    upstreams = request.app[UPSTREAMS]
    return _response(await upstreams.call("POST", url, await request.read(), request.headers))


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def config(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    faults = [name.value for name in EMULATOR_FAULTS]
    if request.app[TAG_CACHE_SWITCH] is not None:
        faults.insert(0, FaultName.TAG_CACHE.value)
    return json_response(DemoConfig(settings.user_id, LEGACY_INTERVAL_S, faults))


async def launch(request: web.Request) -> web.Response:
    """The page's launch, as the demo user (the demo server is the page's API gateway)."""
    url = f"{request.app[SETTINGS].launch_url}/4.0/launch"
    return await _pass_on(request, url)


async def orders_state(request: web.Request) -> web.Response:
    """orders/state and the part endpoints (everything under /mlutp/), as the demo user."""
    url = f"{request.app[SETTINGS].orders_state_url}{request.rel_url.path}"
    return await _pass_on(request, url)


async def create_order(request: web.Request) -> web.Response:
    body = await read_json(request, _new_order)
    settings = request.app[SETTINGS]
    created = {"user_id": settings.user_id, "service": body.service.value}
    url = f"{settings.emulator_url}/emulator/v1/orders"
    return _response(await request.app[UPSTREAMS].call("POST", url, wire.encode(created)))


async def advance(request: web.Request) -> web.Response:
    """The order's next status, as if time had passed (the emulator's control API)."""
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

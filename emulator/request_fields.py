"""What the emulator's handlers read from a request: the user it acts for, and the service
its path names (one the emulator serves, else a 404)."""

from __future__ import annotations

from aiohttp import web

from emulator.documents import LIFECYCLES
from emulator.keys import FEATURES
from shared import wire
from shared.errors import NotFound


def user_id_of(request: web.Request) -> str:
    return wire.checked_user_id(request.headers.get("X-Yandex-UID"))


def served(request: web.Request, service: str) -> bool:
    """The first three services, and any other the policy file names (served generically)."""
    return service in LIFECYCLES or service in request.app[FEATURES].policy.services


def service_of(request: web.Request) -> str:
    service = request.match_info["service"]
    if not served(request, service):
        raise NotFound(f"no service {service!r}")
    return service

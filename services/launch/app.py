from __future__ import annotations

from aiohttp import web

from services.bff.resources import setup_bff
from services.launch import handlers
from services.launch.config import LaunchSettings
from shared.web import create_base_app

SERVICE = "launch"


def create_app(settings: LaunchSettings) -> web.Application:
    app = create_base_app(SERVICE, settings, client_facing=True)
    setup_bff(app, settings)
    app.router.add_post("/4.0/launch", handlers.launch)
    return app

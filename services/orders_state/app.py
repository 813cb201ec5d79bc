from __future__ import annotations

from aiohttp import web

from services.bff.resources import setup_bff
from services.orders_state import handlers
from services.orders_state.config import OrdersStateSettings
from shared.web import create_base_app

SERVICE = "orders_state"


def create_app(settings: OrdersStateSettings) -> web.Application:
    app = create_base_app(SERVICE, settings)
    setup_bff(app, settings)
    app.router.add_post("/mlutp/v1/orders/state", handlers.orders_state)
    return app

from __future__ import annotations

from aiohttp import web

from services.bff.resources import POLICY, setup_bff
from services.orders_state import handlers
from services.orders_state.config import OrdersStateSettings
from services.orders_state.kept_requests import KeptRequests
from services.orders_state.keys import KEPT_REQUESTS, MAX_PART_ORDERS
from services.orders_state.waiting.setup import setup_waiting
from shared.policy import PollingType
from shared.web import create_base_app

SERVICE = "orders_state"


def create_app(settings: OrdersStateSettings) -> web.Application:
    app = create_base_app(SERVICE, settings, client_facing=True)
    # the tags' Redis: the waiting polls' wake-ups and the shared part cache
    setup_bff(app, settings, settings.redis)
    policy = app[POLICY]
    protocol = settings.protocol
    app[MAX_PART_ORDERS] = protocol.max_part_orders
    digests = settings.request_digests
    app[KEPT_REQUESTS] = KeptRequests(
        per_user=digests.per_user, max_entries=digests.max_entries, max_bytes=digests.max_bytes
    )

    setup_waiting(app, settings)
    app.router.add_post("/mlutp/v1/orders/state", handlers.orders_state)
    app.router.add_post("/3.0/taxiontheway", handlers.taxiontheway)
    # every rule's url is served, those of deprecated policy versions too
    for endpoint in policy.endpoints:
        if endpoint.rule.polling_type is PollingType.ROUTE_DISTANCE_DEPENDED:
            app.router.add_post(endpoint.rule.url, handlers.route_handler(endpoint))
        else:
            app.router.add_post(endpoint.rule.url, handlers.part_handler(endpoint))
    return app

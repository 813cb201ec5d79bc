from __future__ import annotations

from aiohttp import web

from services.orders_state.kept_requests import KeptRequests

MAX_PART_ORDERS = web.AppKey("max_part_orders", int)
# the digest request's store (services/orders_state/kept_requests.py)
KEPT_REQUESTS = web.AppKey("kept_requests", KeptRequests)

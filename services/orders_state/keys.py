from __future__ import annotations

from aiohttp import web

from services.orders_state.waiting import WaitingPolls

MAX_PART_ORDERS = web.AppKey("max_part_orders", int)
WAITING = web.AppKey("waiting", WaitingPolls)

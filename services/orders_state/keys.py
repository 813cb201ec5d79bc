from __future__ import annotations

from aiohttp import web

from services.orders_state.part_service import PartService
from services.orders_state.part_upstream import PartUpstreamClient
from services.orders_state.waiting import WaitingPolls

PARTS = web.AppKey("parts", PartService)
TOTW = web.AppKey("totw", PartUpstreamClient)
MAX_PART_ORDERS = web.AppKey("max_part_orders", int)
WAITING = web.AppKey("waiting", WaitingPolls)

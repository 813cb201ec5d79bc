from __future__ import annotations

from aiohttp import web

MAX_PART_ORDERS = web.AppKey("max_part_orders", int)

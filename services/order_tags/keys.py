from __future__ import annotations

from aiohttp import web

from services.order_tags.storage import RedisTagStore

TAG_STORE = web.AppKey("tag_store", RedisTagStore)

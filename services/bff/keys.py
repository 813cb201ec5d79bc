from __future__ import annotations

from aiohttp import web

from services.bff.engine import OrdersStateEngine
from services.bff.known_orders import Limits
from services.bff.metrics import BffMetrics
from services.bff.part_service import PartService
from services.bff.part_upstream import PartUpstreamClient
from services.bff.tag_cache import TagCache
from shared.policy import PollingPolicy

ENGINE = web.AppKey("engine", OrdersStateEngine)
POLICY = web.AppKey("policy", PollingPolicy)
BFF_METRICS = web.AppKey("bff_metrics", BffMetrics)
LIMITS = web.AppKey("limits", Limits)
TAG_CACHE = web.AppKey("tag_cache", TagCache)
# the part machinery: orders_state's part endpoints, and launch's extended order info
PARTS = web.AppKey("parts", PartService)
TOTW = web.AppKey("totw", PartUpstreamClient)

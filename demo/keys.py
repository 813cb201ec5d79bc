from __future__ import annotations

from aiohttp import web

from demo.config import DemoSettings
from demo.tag_cache_switch import TagCacheSwitch
from demo.upstream import DemoUpstreams

SETTINGS = web.AppKey("demo_settings", DemoSettings)
UPSTREAMS = web.AppKey("demo_upstreams", DemoUpstreams)
# None: the stack's Redis is not its own, and tag cache faults are not offered
TAG_CACHE_SWITCH = web.AppKey[TagCacheSwitch | None]("demo_tag_cache_switch")

from __future__ import annotations

from aiohttp import web

from emulator.driver import Driver
from emulator.faults import Faults
from emulator.features import Features
from emulator.stats import Stats
from emulator.world import World
from shared.tag_writer import TagWriter

WORLD = web.AppKey("world", World)
STATS = web.AppKey("stats", Stats)
FAULTS = web.AppKey("faults", Faults)
FEATURES = web.AppKey("features", Features)
DRIVER = web.AppKey("driver", Driver)
TAG_WRITER = web.AppKey("tag_writer", TagWriter)

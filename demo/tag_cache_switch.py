"""The "tag cache down" switch: the stack's own Redis is locked with a password and every
other connection to it (pub/sub ones included) is closed, so order_tags fails as it would
with Redis gone; switched back, the password is removed and the services reconnect.
(`CLIENT PAUSE` does not fit: `CLIENT UNPAUSE` itself waits for the pause to end.)"""

from __future__ import annotations

import secrets

import redis.asyncio as redis_asyncio


class TagCacheSwitch:
    def __init__(self, client: redis_asyncio.Redis) -> None:
        self.client = client
        self.down = False

    @classmethod
    def create(cls, url: str) -> TagCacheSwitch:
        # this connection stays authenticated through the lock: it is the one that lifts it
        return cls(redis_asyncio.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2))

    async def close(self) -> None:
        if self.down:
            await self.set(down=False)
        await self.client.aclose()

    async def set(self, *, down: bool) -> None:
        if down:
            await self.client.config_set("requirepass", secrets.token_hex(16))
            # pub/sub connections too: Redis gone takes them with it, and a process that kept
            # its channels would go on holding re-polls from their last look (the watch cache)
            # as if the store were there
            await self.client.client_kill_filter(_type="normal", skipme=True)
            await self.client.client_kill_filter(_type="pubsub")
        else:
            await self.client.config_set("requirepass", "")
        self.down = down

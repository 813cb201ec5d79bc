"""The browser reference client (demo/static/client.js) as a client under test: headless
Chromium, driven by Selenium through Debian's chromium-driver, opens the kit's page for the
scenario's user from the recording pass-through's own origin. A restart reloads the page (its
localStorage stays); the view is read from what the page recorded."""

from __future__ import annotations

import asyncio
import shutil
import time
import urllib.parse
from typing import Any

from devtools.conformance.clients import KIT_OPTIONS
from devtools.conformance.kit import PATIENCE_S

# a look into the page (a wait for its view) gives up when the kit does
SCRIPT_TIMEOUT_S = PATIENCE_S


class NoBrowser(RuntimeError):
    pass


def find_browser() -> tuple[str, str]:
    """Chromium and its driver on PATH; NoBrowser saying what to install otherwise."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        raise NoBrowser(
            "the browser client needs Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver)"
        )
    return chromium, driver


class BrowserClient:
    name = "browser"
    # it waits, and gives up on user changes, as the kit's Python client does
    change_deadline_s = KIT_OPTIONS.change_deadline_s

    def __init__(self) -> None:
        self._driver: Any = None
        self._page: str | None = None

    def _open(self) -> Any:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium, driver = find_browser()
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
            options.add_argument(argument)
        browser = webdriver.Chrome(service=Service(driver), options=options)
        browser.set_script_timeout(SCRIPT_TIMEOUT_S)
        return browser

    async def start(self, user: str, launch_url: str, orders_state_url: str) -> None:
        if self._driver is None:
            self._driver = await asyncio.to_thread(self._open)
        query = urllib.parse.urlencode(
            {
                "user": user,
                "wait_ms": KIT_OPTIONS.wait_ms,
                "change_deadline_ms": int(KIT_OPTIONS.change_deadline_s * 1000),
            }
        )
        # the page's requests go to its own origin: the pass-through
        self._page = f"{orders_state_url}/conformance/?{query}"
        await asyncio.to_thread(self._driver.get, self._page)

    async def restart(self) -> None:
        await asyncio.to_thread(self._driver.get, self._page)

    async def change(self, service: str, orderid: str, feature: str, value: object) -> None:
        script = (
            "const [service, orderid, feature, value, done] = arguments;"
            "window.kit.change(service, orderid, feature, value).then(() => done(null));"
        )
        await asyncio.to_thread(
            self._driver.execute_async_script, script, service, orderid, feature, value
        )

    async def wait_shown(self, orderid: str, status: str) -> float | None:
        # the page looks every 50 ms until its view has shown it; the kit bounds the wait
        script = (
            "const [orderid, status, done] = arguments;"
            "const look = () => {"
            "  const hit = window.kit && window.kit.shown.find("
            "    ([, o, s]) => o === orderid && s === status);"
            "  if (hit) done(hit[0]); else setTimeout(look, 50);"
            "};"
            "look();"
        )
        epoch_ms = await asyncio.to_thread(
            self._driver.execute_async_script, script, orderid, status
        )
        # the page's clock is the machine's wall clock: to the kit's monotonic one
        return time.monotonic() - (time.time() - float(epoch_ms) / 1000)

    async def stop(self) -> None:
        if self._driver is not None:
            await asyncio.to_thread(self._driver.get, "about:blank")

    async def close(self) -> None:
        if self._driver is not None:
            await asyncio.to_thread(self._driver.quit)
            self._driver = None

"""The demo page in a real browser (issue 15): headless Chromium, driven by Selenium through
Debian's chromium-driver (the chromedriver of the same build as the browser, so no driver
download and no version drift), against a stack of the test's own (`mlutp run`).

It sees a card appear; the order advanced through the emulator shows its new status within
one wait; a comment change locks the card until it is seen; the eats source going down shows
the stale loader and then recovery, with no card moving; and it saves a screenshot."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stack_process import StackProcess

pytestmark = [pytest.mark.browser, pytest.mark.long]

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
# one waiting poll (25 s) plus its random extra and a part request
ONE_WAIT_S = 25 * 17 / 16 + 3


@pytest.fixture(scope="module")
def stack() -> Iterator[StackProcess]:
    # orders change only when the test says so
    with StackProcess({"EMULATOR_DRIVER_ENABLED": "false"}) as stack:
        yield stack


@pytest.fixture
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "SKIPPED: no Chromium here. The demo page's browser test needs Debian's chromium "
            "and chromium-driver (apt-get install chromium chromium-driver; .ci/run does)."
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1200,900")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def emulator_post(stack: StackProcess, path: str) -> dict[str, Any]:
    request = urllib.request.Request(f"{stack.url('emulator')}{path}", data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def test_the_page_follows_orders_changes_and_faults_live(
    stack: StackProcess, browser: Any, tmp_path: Path
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def cards() -> list[Any]:
        return list(browser.find_elements(By.CSS_SELECTOR, "#orders .card"))

    def card(service: str) -> Any:
        return next(c for c in cards() if c.get_attribute("data-key").startswith(f"{service}/"))

    def until(what: str, condition: Any, timeout_s: float = 15) -> Any:
        # each update rewrites a card's details: an element found a moment ago may be gone
        # by the time it is read, so such a look is simply taken again
        return WebDriverWait(
            browser,
            timeout_s,
            poll_frequency=0.1,
            ignored_exceptions=(StaleElementReferenceException,),
        ).until(lambda _: condition(), message=what)

    browser.get(stack.url("demo"))
    until(
        "the page starts polling", lambda: "polls" in browser.find_element(By.ID, "poll-state").text
    )

    # a new order: its card appears with the data of its required part
    browser.find_element(By.ID, "new-taxi").click()
    until("a taxi card", lambda: len(cards()) == 1 and card("taxi").get_attribute("data-status"))
    taxi = card("taxi")
    orderid = taxi.get_attribute("data-key").split("/", 1)[1]
    until("the card is rendered", lambda: "loading" not in taxi.get_attribute("class"))
    assert taxi.get_attribute("data-status") == "searching"

    # the emulator moves the order on: the waiting poll answers, the card shows it
    emulator_post(stack, f"/emulator/v1/orders/taxi/{orderid}/advance")
    until(
        "the new status within one wait",
        lambda: taxi.get_attribute("data-status") == "driving",
        timeout_s=ONE_WAIT_S,
    )
    until(
        "the driver arrives with it",
        lambda: "—" not in taxi.find_element(By.CSS_SELECTOR, 'dd[data-field="driver"]').text,
    )

    # a comment change: locked until a part shows it, then unlocked with the new comment
    comment = taxi.find_element(By.CSS_SELECTOR, '[data-input="comment"]')
    comment.send_keys("by the blue gate")
    taxi.find_element(By.CSS_SELECTOR, '[data-action="comment"]').click()
    until(
        "the change is seen",
        lambda: "seen in the data" in taxi.find_element(By.CLASS_NAME, "result").text,
    )
    assert taxi.get_attribute("data-locked") == "false"
    assert taxi.find_element(By.CSS_SELECTOR, 'dd[data-field="comment"]').text == "by the blue gate"
    # capabilities decide the buttons: a driving order may be cancelled and tipped
    assert taxi.find_element(By.CSS_SELECTOR, '[data-action="tips"]').is_enabled()

    # a food order beside it, then its source goes down: stale, a loader, nothing moves
    browser.find_element(By.ID, "new-eats").click()
    until("an eats card", lambda: len(cards()) == 2)
    eats = card("eats")
    until("the eats card is rendered", lambda: "loading" not in eats.get_attribute("class"))
    shown = [c.get_attribute("data-key") for c in cards()]
    browser.find_element(By.CSS_SELECTOR, '[data-fault="eats_source"]').click()
    # with list tags a source is asked only once what it lists changed: the order moves on,
    # and its source, down now, leaves the card stale
    eats.find_element(By.CSS_SELECTOR, '[data-action="advance"]').click()
    until("the eats card goes stale", lambda: eats.get_attribute("data-update-status") == "stale")
    assert eats.find_element(By.CLASS_NAME, "loader").is_displayed()
    assert taxi.get_attribute("data-update-status") == "actual"
    assert [c.get_attribute("data-key") for c in cards()] == shown
    screenshot = tmp_path / "demo.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000

    browser.find_element(By.CSS_SELECTOR, '[data-fault="eats_source"]').click()
    until(
        "the eats card recovers",
        lambda: eats.get_attribute("data-update-status") == "actual",
        timeout_s=ONE_WAIT_S,
    )
    assert not eats.find_element(By.CLASS_NAME, "loader").is_displayed()
    assert [c.get_attribute("data-key") for c in cards()] == shown

    # the traffic panel counts what this page did
    requests = int(browser.find_element(By.ID, "t-requests").text)
    assert requests > 0
    until("upstream calls counted", lambda: int(browser.find_element(By.ID, "t-upstream").text) > 0)

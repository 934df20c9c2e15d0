"""The web UI's browser tests: Debian's chromium through chromedriver (Selenium), screenshots, waits."""

from __future__ import annotations

import re
import time
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.conftest import _infra_home
from tests.scenarios.scheduler_support import free_port  # noqa: F401 - re-exported for the tests

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
PASSWORD_LINE = re.compile(r"password: (\S+)")


def screenshots_folder(test_name: str) -> Path:
    """Where a test writes its screenshots (printed, and by `make test`): <TOCK_HOME>/screenshots/<test>."""
    folder = _infra_home() / "screenshots" / test_name
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots: {folder}")
    return folder


def browser() -> webdriver.Chrome:
    """Headless Debian chromium at 1280x800 (infra/scripts/chromium.sh installs it; missing = failure)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait(driver: webdriver.Chrome, condition, timeout: float, what: str):
    """Wait for ``condition()``; an element the page's live update replaced meanwhile is looked up again."""
    return WebDriverWait(driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
                         ).until(lambda _driver: condition(), message=f"timed out after {timeout} s waiting for {what}")


def click(driver: webdriver.Chrome, css: str, what: str, timeout: float = 30) -> None:
    """Click the element ``css`` selects, looking it up again if a live update replaced it first."""
    wait(driver, lambda: driver.find_element(By.CSS_SELECTOR, css).click() or True, timeout, f"to click {what}")


def log_in(driver: webdriver.Chrome, base: str, username: str, password: str) -> None:
    driver.get(base + "/")
    driver.find_element(By.ID, "username").send_keys(username)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "login").click()


def wait_for_http(url: str, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout} s")

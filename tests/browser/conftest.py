"""The browser tests drive the HTML report in a real browser: the Debian chromium, headless,
through its chromedriver (Selenium). Without them (or without Selenium) the tests are skipped
with the reason, unless ATP_REQUIRE_BROWSER=1 is set (CI sets it): then they fail."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REQUIRED = os.environ.get("ATP_REQUIRE_BROWSER") == "1"


def missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -r requirements-dev.txt)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is not there (apt-get install {package})"
    return None


@pytest.fixture(scope="session")
def driver() -> Iterator[Any]:
    """One headless chromium for the session, its console log kept."""
    reason = missing()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"ATP_REQUIRE_BROWSER=1, but {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    browser.set_page_load_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()

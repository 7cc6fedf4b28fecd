"""Debian's headless chromium, driven by selenium through /usr/bin/chromedriver."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"  # never selenium-manager: it would download a driver
INSTALL_HINT = "apt-get install -y chromium chromium-driver"


def headless_chromium(url: str) -> Iterator[Any]:
    """Headless chromium opened at ``url``, with the console log kept (a fixture's body: yields
    the driver, quits it after)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900",
                 "--enable-unsafe-swiftshader"):  # software WebGL for the graph canvas
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.get(url)
    yield driver
    driver.quit()

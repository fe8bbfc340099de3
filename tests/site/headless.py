"""What the browser tests share: whether Chromium, chromedriver and Selenium are here (in CI
they must be: `make setup` installs them), the pytest marks that skip or fail accordingly,
and a headless Chromium started the same way for every test."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 20.0

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - the dev extra installs it
    webdriver = None

MISSING = [name for name, found in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER),
                                     ("selenium", webdriver)) if not found]


def browser_marks() -> list[Any]:
    """`pytestmark` of a browser test module; fails the run in CI when a part is missing."""
    if MISSING and os.environ.get("CI"):
        pytest.fail(f"browser tests need {', '.join(MISSING)} (make setup installs them)", pytrace=False)
    return [pytest.mark.browser, pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)}")]


def chromium(language: str | None = None) -> Any:
    """A headless Chromium with its console and network logged, offline-friendly flags."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1280,1000", "--no-first-run", "--disable-background-networking",
            "--disable-component-update"]
    if language:
        args.append(f"--lang={language}")
        options.add_experimental_option("prefs", {"intl.accept_languages": language})
    for arg in args:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    return driver

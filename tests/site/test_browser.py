"""The built site in a real headless Chromium (Selenium + Debian's chromium/chromedriver).

The site is built with `runbook site build` (the hostile runbook from tests/data/site
added through RUNBOOK_PATH) and served with `runbook site serve` on a loopback port.
Screenshots go to $RUNBOOK_SCREENSHOTS (default: a temporary directory).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.site.headless import WAIT_S, browser_marks, chromium

ROOT = Path(__file__).resolve().parents[2]

try:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the dev extra installs it
    webdriver = None

pytestmark = browser_marks()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "RUNBOOK_PATH": str(ROOT / "tests" / "data" / "site")}
    build = subprocess.run([sys.executable, "-m", "runbook", "site", "build", "-o", str(out)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    assert "no search index" not in build.stderr, build.stderr
    server = subprocess.Popen([sys.executable, "-m", "runbook", "site", "serve", "--no-build", "-o", str(out),
                               "--port", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline().strip() if server.stdout else ""
        assert line.startswith("http://127.0.0.1:"), line
        yield line
    finally:
        server.terminate()
        server.wait(timeout=10)


def _driver(language: str = "en-US") -> webdriver.Chrome:
    return chromium(language)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = _driver()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("RUNBOOK_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _requested_urls(driver: webdriver.Chrome) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _console_errors(driver: webdriver.Chrome) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _search(driver: webdriver.Chrome, base_url: str, lang: str, query: str) -> list[str]:
    driver.get(f"{base_url}{lang}/search/?q={query}")
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results li")
        or d.find_element(By.ID, "search-status").text.strip() not in ("", d.find_element(
            By.ID, "search-status").get_attribute("data-loading")))
    return [unquote(urlparse(a.get_attribute("href")).path)
            for a in driver.find_elements(By.CSS_SELECTOR, "#search-results li .result-title a")]


PAGES = ["", "en/", "zh/", "en/runbooks/training-hang/", "zh/runbooks/ray-hang/",
         "en/kb/gkd-hang-quick-card/", "zh/kb/dataloader-token-buffer/", "en/symptoms/",
         "zh/categories/", "en/checks/", "zh/checks/stack/", "en/search/?q=NCCL", "zh/search/?q=显存"]


def test_pages_load_without_console_errors_or_other_hosts(browser, base_url: str) -> None:
    host = urlparse(base_url).netloc
    _requested_urls(browser)  # drain
    for path in PAGES:
        browser.get(base_url + path)
        WebDriverWait(browser, WAIT_S).until(lambda d: d.execute_script("return document.readyState")
                                             == "complete")
        time.sleep(0.3)  # let the search page's import settle
        assert _console_errors(browser) == [], path
    foreign = [u for u in _requested_urls(browser)
               if urlparse(u).scheme in ("http", "https", "ws", "wss") and urlparse(u).netloc != host]
    assert foreign == []


def test_language_switch_keeps_the_page_and_anchor(browser, base_url: str) -> None:
    browser.get(base_url + "en/runbooks/training-hang/#read-log")
    browser.find_element(By.CSS_SELECTOR, "[data-lang-switch]").click()
    WebDriverWait(browser, WAIT_S).until(ec.url_contains("/zh/"))
    assert urlparse(browser.current_url).path == "/zh/runbooks/training-hang/"
    assert urlparse(browser.current_url).fragment == "read-log"
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "zh-CN"
    browser.find_element(By.CSS_SELECTOR, "[data-lang-switch]").click()
    WebDriverWait(browser, WAIT_S).until(ec.url_contains("/en/"))
    assert urlparse(browser.current_url).path == "/en/runbooks/training-hang/"


@pytest.mark.parametrize(("lang", "query", "expected"), [
    ("zh", "显存不足", "/zh/runbooks/cuda-oom/"),
    ("zh", "nvidia-smi 卡住", "/zh/runbooks/gpu-driver-hang/"),
    ("en", "NCCL timeout", "/en/runbooks/nccl-errors/"),
    ("en", "CUDA out of memory", "/en/runbooks/cuda-oom/"),
])
def test_search_finds_the_right_runbook(browser, base_url: str, lang: str, query: str,
                                        expected: str) -> None:
    results = _search(browser, base_url, lang, query)
    assert expected in results[:3], results[:5]


def test_flowchart_renders_and_its_links_work(browser, base_url: str) -> None:
    browser.get(base_url + "en/runbooks/training-hang/")
    svg = browser.find_element(By.CSS_SELECTOR, ".flowchart-wrap svg")
    assert svg.size["width"] > 300 and svg.size["height"] > 200
    nodes = browser.find_elements(By.CSS_SELECTOR, ".flowchart-wrap g.fc-node")
    assert len(nodes) > 10
    link = browser.find_element(By.CSS_SELECTOR, '.flowchart-wrap g.fc-node[data-id="read-log"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    WebDriverWait(browser, WAIT_S).until(lambda d: urlparse(d.current_url).fragment == "read-log")
    target = browser.find_element(By.ID, "read-log")
    assert target.is_displayed()
    assert browser.execute_script("return document.querySelector(':target').id") == "read-log"


def test_hostile_runbook_is_inert(browser, base_url: str) -> None:
    for lang in ("en", "zh"):
        browser.get(f"{base_url}{lang}/runbooks/xss-attempt/")
        for link in browser.find_elements(By.CSS_SELECTOR, "main a"):
            href = link.get_attribute("href") or ""
            assert not href.lower().startswith("javascript:"), href
        assert browser.execute_script("return window.__xss") is None
        assert "<script>window.__xss" in browser.find_element(By.TAG_NAME, "h1").text


@pytest.mark.parametrize(("language", "landing"), [("zh-CN", "/zh/"), ("en-US", "/en/"), ("de-DE", "/en/")])
def test_start_page_follows_the_browser_language(base_url: str, language: str, landing: str) -> None:
    driver = _driver(language)
    try:
        driver.get(base_url)
        WebDriverWait(driver, WAIT_S).until(lambda d: urlparse(d.current_url).path != "/")
        assert urlparse(driver.current_url).path == landing
    finally:
        driver.quit()


def test_screenshots(browser, base_url: str, shots: Path) -> None:
    """Start page, a runbook page and a search result page, in both languages (look at them)."""
    taken = []
    for lang, query in (("en", "NCCL timeout"), ("zh", "显存不足")):
        browser.get(f"{base_url}{lang}/")
        taken.append(_shot(browser, shots / f"start-{lang}.png"))
        browser.get(f"{base_url}{lang}/runbooks/training-hang/")
        taken.append(_shot(browser, shots / f"runbook-{lang}.png"))
        _search(browser, base_url, lang, query)
        taken.append(_shot(browser, shots / f"search-{lang}.png"))
    browser.set_window_size(390, 844)  # a phone
    browser.get(f"{base_url}zh/runbooks/training-hang/")
    taken.append(_shot(browser, shots / "runbook-zh-phone.png"))
    browser.set_window_size(1280, 1000)
    assert all(p.stat().st_size > 10_000 for p in taken)


def _shot(driver: webdriver.Chrome, path: Path) -> Path:
    driver.save_screenshot(str(path))
    return path

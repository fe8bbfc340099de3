"""`runbook site serve` in a real headless Chromium: a saved runbook shows in the open page by
itself (the page reloads; the test never navigates), and a save that does not load shows its
error in the page while the last good version stays served."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.site.headless import WAIT_S, browser_marks, chromium

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "runbooks" / "checkpoint-problems.yaml"
TITLE = "Checkpoint does not load, or the resume loses state"
START_S = 300.0  # the first build (the repository's own content too) on a busy CI machine

try:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the dev extra installs it
    By = None

pytestmark = browser_marks()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline() if proc.stdout else ""),
                     daemon=True).start()
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        return ""


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """(base URL, the runbook file it watches, the site directory) of a live `site serve`."""
    folder = tmp_path / "runbooks"
    folder.mkdir()
    file = folder / "serve-reload-demo.yaml"
    file.write_text(SOURCE.read_text("utf-8").replace("id: checkpoint-problems", "id: serve-reload-demo", 1),
                    "utf-8")
    out = tmp_path / "site"
    env = {**os.environ, "RUNBOOK_PATH": str(folder)}
    log = (tmp_path / "serve.log").open("w")
    argv = [sys.executable, "-m", "runbook", "site", "serve", "--no-search", "-o", str(out), "--port", "0"]
    server = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = _first_line(server, START_S)
        assert line.startswith("http://127.0.0.1:"), (line, (tmp_path / "serve.log").read_text())
        yield line, file, out
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def _h1(driver) -> str:
    return driver.find_element(By.TAG_NAME, "h1").text


def _wait(driver):  # type: ignore[no-untyped-def]
    """A wait that reads through the page reloading under it (an element gone stale midway)."""
    return WebDriverWait(driver, WAIT_S, ignored_exceptions=(NoSuchElementException,
                                                             StaleElementReferenceException))


def test_a_saved_runbook_reloads_the_open_page(served) -> None:
    base, file, out = served
    driver = chromium("en-US")
    try:
        driver.get(f"{base}en/runbooks/serve-reload-demo/")
        assert _h1(driver) == TITLE
        driver.execute_script("window.__notReloaded = true")  # gone once the page reloads itself

        file.write_text(file.read_text("utf-8").replace(TITLE, "Checkpoint title edited on save"), "utf-8")
        _wait(driver).until(lambda d: _h1(d) == "Checkpoint title edited on save")
        assert driver.execute_script("return window.__notReloaded") is None
        assert driver.current_url == f"{base}en/runbooks/serve-reload-demo/"

        good = file.read_text("utf-8")
        file.write_text(good.replace("title:", "title: [", 1), "utf-8")  # not YAML any more
        _wait(driver).until(
            lambda d: d.find_elements(By.ID, "runbook-serve-error"))
        assert "serve-reload-demo.yaml" in driver.find_element(By.ID, "runbook-serve-error").text
        assert _h1(driver) == "Checkpoint title edited on save"  # the last good page stays

        file.write_text(good.replace("Checkpoint title edited on save", "Fixed again"), "utf-8")
        _wait(driver).until(lambda d: _h1(d) == "Fixed again")
        assert driver.find_elements(By.ID, "runbook-serve-error") == []
    finally:
        driver.quit()
    built = (out / "en" / "runbooks" / "serve-reload-demo" / "index.html").read_text("utf-8")
    assert "Fixed again" in built and "__reload" not in built  # the script is the server's, not the site's

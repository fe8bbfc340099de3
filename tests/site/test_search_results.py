"""Search finds the same pages, in the same order, whether a build drew its pages or took the
flowcharts and article bodies from the load cache (runbook/site/fragments.py).

Both sites are built from the repository's content (plus tests/data/site), served on loopback
ports, and searched in headless Chromium through the Pagefind index itself (its JS API, every
result, not only the twenty the search page shows), for English and Chinese queries.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.site.headless import WAIT_S, browser_marks, chromium

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ["NCCL timeout", "CUDA out of memory", "checkpoint", "rendezvous", "显存不足", "卡住", "数据加载",
           "nvidia-smi"]
# Every result of a query, as Pagefind ranks them: (url, title) of each.
SEARCH_JS = """
const [root, query, done] = arguments;
import(root + "pagefind/pagefind.js")
  .then(async (pagefind) => {
    await pagefind.options({baseUrl: "/"});
    const search = await pagefind.search(query);
    const pages = await Promise.all(search.results.map((r) => r.data()));
    done(pages.map((p) => [p.url, p.meta.title || ""]));
  })
  .catch((err) => done("error: " + err));
"""

pytestmark = browser_marks()


def _build(out: Path, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "runbook", "site", "build", "-o", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "no search index" not in done.stderr and (out / "pagefind" / "pagefind.js").is_file(), done.stderr


def _serve(out: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "runbook", "site", "serve", "--no-build", "-o", str(out),
                             "--port", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The base URLs of two builds: the first with no cached pieces, the second from them."""
    work = tmp_path_factory.mktemp("search-results")
    env = {**os.environ, "RUNBOOK_PATH": str(ROOT / "tests" / "data" / "site"),
           "XDG_CACHE_HOME": str(work / "cache")}  # empty: the first build draws every page
    _build(work / "drawn", env)
    _build(work / "cached", env)
    assert (work / "cache" / "runbook" / "site").is_dir()
    servers = [_serve(work / "drawn", env), _serve(work / "cached", env)]
    try:
        urls = [server.stdout.readline().strip() if server.stdout else "" for server in servers]
        assert all(url.startswith("http://127.0.0.1:") for url in urls), urls
        yield urls[0], urls[1]
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    driver = chromium()
    driver.set_script_timeout(WAIT_S)
    yield driver
    driver.quit()


def _results(driver, base_url: str, query: str) -> list[list[str]]:
    driver.get(base_url + "en/")
    found = driver.execute_async_script(SEARCH_JS, base_url, query)
    assert isinstance(found, list), found
    return found


@pytest.mark.parametrize("query", QUERIES)
def test_the_same_pages_in_the_same_order(browser, sites: tuple[str, str], query: str) -> None:
    drawn, cached = (_results(browser, base_url, query) for base_url in sites)
    assert drawn, f"{query!r} finds nothing: the comparison would prove nothing"
    assert cached == drawn


def test_queries_find_what_they_should(browser, sites: tuple[str, str]) -> None:
    urls = {query: [url for url, _ in _results(browser, sites[1], query)]
            for query in ("显存不足", "NCCL timeout")}
    assert "/zh/runbooks/cuda-oom/" in urls["显存不足"][:5], urls["显存不足"][:5]
    assert any(url.startswith(("/en/runbooks/nccl-errors/", "/zh/runbooks/nccl-errors/"))
               for url in urls["NCCL timeout"][:5]), urls["NCCL timeout"][:5]

"""`runbook site serve` without a browser: the incremental rebuild, the file watcher, the
reload state and its script, and the search index refreshed in the background."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from runbook.library.kb import KnowledgeBase
from runbook.library.runbooks import load_library
from runbook.site import pages as P
from runbook.site.build import build_site, repository_path
from runbook.site.incremental import ContentError, SearchRefresher, SiteSession
from runbook.site.serve import Live, make_server
from runbook.site.theme import Theme, find_theme
from runbook.site.watch import Watcher

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "runbooks" / "checkpoint-problems.yaml"
TITLE = "Checkpoint does not load, or the resume loses state"


def _copy_runbook(folder: Path, rid: str = "live-demo") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{rid}.yaml"
    target.write_text(SOURCE.read_text("utf-8").replace("id: checkpoint-problems", f"id: {rid}", 1), "utf-8")
    return target


@pytest.fixture()
def session(tmp_path: Path) -> tuple[SiteSession, Path]:
    """A site of one runbook (and no articles) built into tmp_path/out."""
    file = _copy_runbook(tmp_path / "rb")
    runbooks = load_library([file]).runbooks()
    content = P.Content(runbooks, KnowledgeBase(), [], "", repository_path)
    theme = Theme(find_theme(ROOT / "site"))
    out = tmp_path / "out"
    build_site(content, theme, out, search=False)
    return SiteSession(content, theme, out), file


def _page(out: Path, lang: str, rid: str = "live-demo") -> str:
    return (out / P.runbook_url(lang, rid) / "index.html").read_text("utf-8")


def test_a_saved_title_rebuilds_the_runbook_pages_and_the_index_pages(session) -> None:
    site, file = session
    assert TITLE in _page(site.out, "en")
    schema_page = site.out / "en" / "format" / "index.html"
    schema_before = schema_page.stat().st_mtime_ns
    file.write_text(file.read_text("utf-8").replace(TITLE, "Renamed on save"), "utf-8")
    done = site.changed([file])
    assert "Renamed on save" in _page(site.out, "en")
    assert TITLE not in _page(site.out, "en")
    assert "Renamed on save" in (site.out / "en" / "index.html").read_text("utf-8")  # the home page lists it
    assert schema_page.stat().st_mtime_ns == schema_before  # not affected: not rewritten
    assert 2 <= done.pages < len(P.all_pages(site.content))


def test_rebuilt_pages_are_the_pages_a_full_build_writes(session, tmp_path: Path) -> None:
    site, file = session
    file.write_text(file.read_text("utf-8").replace(TITLE, "Renamed for the comparison"), "utf-8")
    site.changed([file])
    site.changed([file])  # the second time from the Markdown cache
    fresh = tmp_path / "fresh"
    content = P.Content(load_library([file]).runbooks(), KnowledgeBase(), [], "", repository_path)
    build_site(content, site.theme, fresh, search=False)
    for page in P.all_pages(content):
        assert (site.out / page.path).read_text("utf-8") == (fresh / page.path).read_text("utf-8"), page.path


def test_a_change_no_other_page_shows_rebuilds_only_the_runbook_pages(session) -> None:
    site, file = session
    old = "Loading the checkpoint did not finish within the timeout."
    file.write_text(file.read_text("utf-8").replace(old, "Loading took too long (edited)."), "utf-8")
    done = site.changed([file])
    assert done.pages == 2
    assert "Loading took too long (edited)." in _page(site.out, "en")


def test_a_file_that_does_not_load_keeps_the_last_good_pages(session) -> None:
    site, file = session
    file.write_text("id: live-demo\ntitle: [unclosed\n", "utf-8")
    with pytest.raises(ContentError):
        site.changed([file])
    assert TITLE in _page(site.out, "en")
    assert [rb.id for rb in site.content.runbooks] == ["live-demo"]


def test_added_and_removed_runbooks_come_and_go(session) -> None:
    site, file = session
    other = _copy_runbook(file.parent, "live-other")
    site.changed([other])
    assert "live-other" in _page(site.out, "en", "live-other")
    other.unlink()
    site.changed([other])
    assert not (site.out / P.runbook_url("en", "live-other")).exists()
    assert [rb.id for rb in site.content.runbooks] == ["live-demo"]


def test_a_second_file_with_the_same_id_is_refused(session) -> None:
    site, file = session
    twin = _copy_runbook(file.parent / "more", "live-demo")
    with pytest.raises(ContentError, match="also defined"):
        site.changed([twin])


def test_watcher_sees_saved_added_and_removed_files(tmp_path: Path) -> None:
    file = _copy_runbook(tmp_path / "rb")
    article = tmp_path / "kb" / "some-note" / "en.md"
    article.parent.mkdir(parents=True)
    article.write_text("---\nid: some-note\n---\nbody\n", "utf-8")
    (tmp_path / "rb" / "live-demo.tests.yaml").write_text("cases: []\n", "utf-8")
    watcher = Watcher([tmp_path / "rb"], [tmp_path / "kb"])
    assert watcher.changes() == []
    file.write_text(file.read_text("utf-8") + "\n", "utf-8")
    added = _copy_runbook(tmp_path / "rb", "live-new")
    article.unlink()
    (tmp_path / "rb" / "live-demo.tests.yaml").write_text("cases: [1]\n", "utf-8")  # not a runbook
    assert watcher.changes() == sorted([file, added, article])
    assert watcher.changes() == []


def test_live_wait_returns_on_a_change_and_times_out_without_one() -> None:
    live = Live()
    begin = time.monotonic()
    assert live.wait(live.state, timeout=0.2)["state"] == 1
    assert time.monotonic() - begin >= 0.2
    threading.Timer(0.1, live.rebuilt).start()
    assert live.wait(1, timeout=10) == {"version": 2, "state": 2, "error": ""}
    live.failed("x.yaml:3:1: bad </script><script>alert(1)</script>")
    now = live.wait(2, timeout=10)
    assert now["version"] == 2 and now["error"].startswith("x.yaml")
    assert b"</script><script>alert" not in live.script()  # the error cannot close the script


def test_served_pages_carry_the_reload_script_and_built_files_do_not(session) -> None:
    site, _file = session
    live = Live()
    server = make_server(site.out, "127.0.0.1", 0, live)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        page = urllib.request.urlopen(f"{base}/en/runbooks/live-demo/", timeout=10).read().decode()
        assert "/__reload" in page and page.rstrip().endswith("</html>")
        assert "/__reload" not in _page(site.out, "en")
        threading.Timer(0.2, live.rebuilt).start()
        answer = json.loads(urllib.request.urlopen(f"{base}/__reload?state=1", timeout=10).read())
        assert answer["version"] == 2
        css = urllib.request.urlopen(f"{base}/static/style.css", timeout=10).read()
        assert b"__reload" not in css
    finally:
        server.shutdown()
        server.server_close()


def test_search_refresher_swaps_in_a_new_bundle(session) -> None:
    site, _file = session
    lines: list[str] = []
    refresher = SearchRefresher(site.out, lines.append)
    try:
        refresher.request()
        deadline = time.monotonic() + 120
        while not lines and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        refresher.stop()
    if lines and "not installed" in lines[0]:
        pytest.skip(lines[0])
    assert lines and "refreshed" in lines[0], lines
    entry = json.loads((site.out / "pagefind" / "pagefind-entry.json").read_text("utf-8"))
    assert entry["languages"]["zh"]["page_count"] > 2
    assert not (site.out / ".pagefind-new").exists() and not (site.out / ".pagefind-old").exists()


def test_a_saved_article_is_what_the_triage_page_compares_error_lines_with(session, tmp_path: Path,
                                                                          monkeypatch) -> None:
    """The triage page's BM25 index holds the articles' text: saving an article writes it again."""
    site, _ = session
    folder = tmp_path / "kb" / "frobnicator-notes"
    folder.mkdir(parents=True)
    for lang in ("en", "zh"):
        source = (ROOT / "kb" / "checkpoint-problems" / f"{lang}.md").read_text("utf-8")
        renamed = source.replace("checkpoint-problems", "frobnicator-notes", 1)
        (folder / f"{lang}.md").write_text(renamed, "utf-8")
    article = folder / "en.md"
    monkeypatch.setenv("RUNBOOK_KB_PATH", str(tmp_path / "kb"))
    data = site.out / "static" / "triage" / "signatures.json"

    def article_terms() -> set[str]:
        docs = json.loads(data.read_text("utf-8"))["similarity"]["docs"]
        return {term for doc in docs if doc["id"] == "frobnicator-notes"
                for _, counts in doc["fields"] for term in counts}

    site.changed([article])
    assert "zorblaxian" not in article_terms()
    article.write_text(article.read_text("utf-8") + "\nA zorblaxian failure.\n", "utf-8")
    site.changed([article])
    assert "zorblaxian" in article_terms()

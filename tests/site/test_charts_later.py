"""A first build with search writes the runbook pages before their flowcharts are drawn, starts
Pagefind on them and puts the charts in once it has read them: the pages end byte for byte as a
build that draws every chart first, and the index as Pagefind makes it from those pages."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from runbook.site import build
from runbook.site.build import CHART_MARK, build_site, index_for_search, load_content
from runbook.site.theme import Theme, find_theme

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pagefind") is None,
                                reason="pagefind is not installed")


def pages(site: Path) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*.html"))
            if p.relative_to(site).parts[0] != "pagefind"}


def parts(bundle: Path, folder: str) -> dict[str, bytes]:
    """Pagefind's pages (fragment/) or word index (index/): named by their content, so a run over
    the same text writes the same files (the filter and meta file names vary from run to run)."""
    return {p.name: p.read_bytes() for p in sorted((bundle / folder).iterdir())}


@pytest.mark.parametrize("forked", [False, True], ids=["one-process", "forked-workers"])
def test_charts_put_in_after_indexing_leave_the_pages_and_the_index_as_drawn_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forked: bool) -> None:
    if forked:
        monkeypatch.setattr(build, "FORK_MIN_PAGES", 0)
        monkeypatch.setenv("RUNBOOK_SITE_JOBS", "2")
    theme = Theme(find_theme(ROOT / "site"))
    content, _ = load_content()
    later = build_site(content, theme, tmp_path / "later")
    assert later.search_error is None and not later.search_reused
    build_site(content, theme, tmp_path / "drawn", search=False)

    built = pages(tmp_path / "later")
    assert built == pages(tmp_path / "drawn")
    assert not [name for name, html in built.items() if CHART_MARK.encode() in html]
    chart = b'<svg xmlns="http://www.w3.org/2000/svg" class="fc"'
    charted = [name for name, html in built.items() if chart in html]
    assert len(charted) == 2 * len(content.runbooks)  # every runbook page, in both languages

    assert index_for_search(tmp_path / "drawn") is None  # Pagefind over the finished pages
    for folder in ("fragment", "index"):
        assert parts(tmp_path / "later" / "pagefind", folder) == \
            parts(tmp_path / "drawn" / "pagefind", folder)

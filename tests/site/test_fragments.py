"""Flowcharts and article bodies kept in the load cache (runbook/site/fragments.py): a site built
from cached pieces is byte for byte the site rendered without them, and a changed input misses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runbook.format.model import Text
from runbook.library.cache import cache_root
from runbook.library.runbooks import load_library
from runbook.site import fragments
from runbook.site.build import build_site, load_content
from runbook.site.flowchart import flowchart_svg
from runbook.site.markdown import MarkdownRenderer
from runbook.site.theme import Theme, find_theme

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty load cache for this test alone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return cache_root() / fragments.KIND


def site_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_site_from_cached_pieces_is_the_site_rendered_without_them(tmp_path: Path, own_cache: Path) -> None:
    theme = Theme(find_theme(ROOT / "site"))
    content, _ = load_content()
    build_site(content, theme, tmp_path / "cold", search=False)
    stored = sorted(own_cache.rglob("*"))
    assert sum(p.is_file() for p in stored) >= len(content.runbooks) * 2  # a chart per language at least

    build_site(content, theme, tmp_path / "warm", search=False)
    assert sorted(own_cache.rglob("*")) == stored  # everything came from the cache: nothing new written
    assert site_files(tmp_path / "warm") == site_files(tmp_path / "cold")


def _runbook(rb_id: str):
    return next(r for r in load_library([ROOT / "runbooks"]).runbooks() if r.id == rb_id)


def _chart(rb, lang="en", href=lambda rid, step: f"../{rid}/#{step}") -> str:
    return fragments.flowchart(rb, lang, lambda node_id: node_id, href)


def test_a_chart_follows_every_input_it_draws(own_cache: Path) -> None:
    rb = _runbook("training-hang")
    assert _chart(rb) == flowchart_svg(rb, "en", runbook_href=lambda rid, step: f"../{rid}/#{step}")
    assert _chart(rb, "zh") == flowchart_svg(rb, "zh", runbook_href=lambda rid, step: f"../{rid}/#{step}")

    step_id, step = next(iter(rb.steps.items()))
    retitled = dataclasses.replace(step, title=Text("A brand new title", "新标题"))
    changed = dataclasses.replace(rb, steps={**rb.steps, step_id: retitled})
    assert "A brand new title" in _chart(changed) and "A brand new title" not in _chart(rb)

    # A hand-over's link is part of the key: another runbook's start step moving changes it.
    handover = next(r for r in load_library([ROOT / "runbooks"]).runbooks()
                    if any(":" in b.goto for s in r.steps.values() for b in s.branches))
    moved = _chart(handover, href=lambda rid, step: f"../{rid}/#moved-start")
    assert "#moved-start" in moved and "#moved-start" not in _chart(handover)


def test_a_damaged_entry_is_drawn_again(own_cache: Path) -> None:
    rb = _runbook("training-hang")
    expected = _chart(rb)
    for entry in own_cache.rglob("*"):
        if entry.is_file():
            entry.write_bytes(entry.read_bytes()[:-7] + b"garbage")
    assert _chart(rb) == expected


def test_an_article_body_is_cached_per_page_and_text(own_cache: Path) -> None:
    renderer = MarkdownRenderer(lambda kind, target, anchor: f"../../{kind}/{target}/{anchor}")
    source = "# Title\n\n## Part one\n\nSee [the runbook](runbook:training-hang#read-log).\n"
    first = fragments.article("en/kb/x/index.html", source, renderer.render)
    again = fragments.article("en/kb/x/index.html", source, lambda text: pytest.fail("not from the cache"))
    assert again == first and again.headings and again.links == ["runbook:training-hang"]
    elsewhere = fragments.article("zh/kb/x/index.html", source, lambda text: renderer.render(text + "\nzh"))
    assert elsewhere.html.endswith("zh</p>\n")

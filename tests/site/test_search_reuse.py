"""A rebuild whose pages are unchanged keeps the earlier Pagefind bundle (the languages and pages
a fresh Pagefind run indexes); a rebuild with a changed page re-indexes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from runbook.library.runbooks import load_library
from runbook.site import search_reuse
from runbook.site.build import build_site, index_for_search, load_content
from runbook.site.theme import Theme, find_theme

ROOT = Path(__file__).resolve().parents[2]
EXTRA = ROOT / "tests" / "data" / "site"  # two more runbooks: the "changed" site

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pagefind") is None,
                                reason="pagefind is not installed")


def bundle_bytes(bundle: Path) -> dict[str, bytes]:
    return {str(p.relative_to(bundle)): p.read_bytes() for p in sorted(bundle.rglob("*"))
            if p.is_file() and p.name != search_reuse.FINGERPRINT_FILE}


def _entry(bundle: dict[str, bytes]) -> dict[str, int]:
    """Each language Pagefind indexed, with its page count (pagefind-entry.json)."""
    languages = json.loads(bundle["pagefind-entry.json"])["languages"]
    return {lang: part["page_count"] for lang, part in languages.items()}


def test_unchanged_pages_keep_the_bundle_and_a_changed_page_reindexes(tmp_path: Path) -> None:
    out, theme = tmp_path / "site", Theme(find_theme(ROOT / "site"))
    content, _ = load_content()
    first = build_site(content, theme, out)
    assert first.search_error is None and not first.search_reused
    indexed = bundle_bytes(out / "pagefind")
    assert any(name.endswith(".pf_index") for name in indexed)

    again = build_site(content, theme, out)
    assert again.search_error is None and again.search_reused
    assert bundle_bytes(out / "pagefind") == indexed
    assert not (out / search_reuse.PREVIOUS).exists()

    # A fresh Pagefind run over the same pages indexes the same languages and pages (its file
    # names hold hashes that differ from run to run, so bytes are not compared).
    assert index_for_search(out, tmp_path / "fresh") is None
    assert _entry(bundle_bytes(tmp_path / "fresh")) == _entry(indexed)

    content.runbooks = sorted([*content.runbooks, *load_library([EXTRA]).runbooks()], key=lambda r: r.id)
    changed = build_site(content, theme, out)
    assert changed.search_error is None and not changed.search_reused
    assert bundle_bytes(out / "pagefind") != indexed


def test_no_search_build_drops_the_old_bundle(tmp_path: Path) -> None:
    out, theme = tmp_path / "site", Theme(find_theme(ROOT / "site"))
    content, _ = load_content()
    build_site(content, theme, out)
    bare = build_site(content, theme, out, search=False)
    assert not bare.search_reused and not (out / "pagefind").exists()

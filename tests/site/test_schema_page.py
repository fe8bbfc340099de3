"""The runbook format reference page, built by `runbook site build` as a user runs it (with
its Pagefind index): both languages, every field and check type, links and search."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from runbook.checks import CHECK_TYPES
from runbook.library.schemadoc import raw_schema, reference

ROOT = Path(__file__).resolve().parents[2]


class _Page(HTMLParser):
    """Links, ids, and the text of each field (a section) and check type (a table row) by id."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.row_text: dict[str, str] = {}
        self._row: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if found.get("href"):
            self.links.append(str(found["href"]))
        if tag in ("section", "tr"):
            self._row = found.get("id")
            if self._row:
                self.row_text[self._row] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("section", "tr"):
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row:
            self.row_text[self._row] += data


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text("utf-8"))
    return page


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "runbook", "site", "build", "-o", str(out)], cwd=ROOT,
                           env={**os.environ, "RUNBOOK_LANG": "en"}, capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr
    return out


def _plain(markdown: str) -> str:
    return markdown.replace("`", "")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_lists_every_top_level_field_and_check_type(site: Path, lang: str) -> None:
    path = site / lang / "format" / "index.html"
    page = parse(path)
    html = path.read_text("utf-8")
    assert f'<html lang="{"zh-CN" if lang == "zh" else "en"}">' in html
    for name in raw_schema()["properties"]:
        assert name in page.row_text, name
    for name in CHECK_TYPES:
        assert f"../checks/{name}/" in page.links, name
        assert f"check-types.{name}" in page.ids
    assert {"steps.check.timeout", "conclusions.fixes.effect", "types.duration"} <= page.ids
    assert "<code class=\"language-yaml\">apiVersion: runbook/v1\nid: master-port-busy" in html


def test_chinese_page_shows_chinese_descriptions(site: Path) -> None:
    schema = raw_schema()
    timeout = schema["$defs"]["step"]["properties"]["check"]["properties"]["timeout"]
    zh, en = parse(site / "zh" / "format" / "index.html"), parse(site / "en" / "format" / "index.html")
    assert _plain(timeout["x-description-zh"]) in zh.row_text["steps.check.timeout"]
    assert _plain(timeout["description"]) in en.row_text["steps.check.timeout"]
    assert _plain(timeout["description"]) not in zh.row_text["steps.check.timeout"]
    for field in reference().fields:
        assert _plain(field.description.zh) in zh.row_text[field.anchor], field.path
    zh_html = (site / "zh" / "format" / "index.html").read_text("utf-8")
    assert "<h1 data-pagefind-meta=\"title\">Runbook 格式参考</h1>" in zh_html
    assert "查找节点上的训练进程" in zh.row_text["check-types.process"]  # the check's own summary


def _resolves(page: Path, link: str) -> bool:
    url = urlparse(urljoin("file://" + str(page), link))
    target = Path(unquote(url.path))
    if link.endswith("/") or target.is_dir() or not target.suffix:
        target = target / "index.html"
    if not target.is_file():
        return False
    return not url.fragment or unquote(url.fragment) in parse(target).ids


def test_every_link_on_the_page_resolves(site: Path) -> None:
    for lang in ("en", "zh"):
        page = site / lang / "format" / "index.html"
        broken = [link for link in parse(page).links if not _resolves(page, link)]
        assert broken == []


def test_navigation_and_checks_index_link_to_it(site: Path) -> None:
    for lang in ("en", "zh"):
        reference_page = (site / lang / "format" / "index.html").resolve()
        for name in ("index.html", "checks/index.html", "runbooks/training-hang/index.html",
                     "checks/port/index.html"):
            page = site / lang / name
            targets = {Path(unquote(urlparse(urljoin("file://" + str(page), link)).path)) / "index.html"
                       for link in parse(page).links}
            assert reference_page in {t.resolve() for t in targets}, page
        checks = site / lang / "checks" / "index.html"
        assert "../format/#check-types" in parse(checks).links
    en = (site / "en" / "format" / "index.html").read_text("utf-8")
    assert 'href="../../zh/format/" hreflang="zh"' in en


def _fragments(site: Path) -> dict[str, dict]:
    """Pagefind's per-page records (gzip'd JSON after a `pagefind_dcd` signature), by URL."""
    records = {}
    for path in (site / "pagefind" / "fragment").glob("*.pf_fragment"):
        raw = gzip.decompress(path.read_bytes())
        record = json.loads(raw[raw.index(b"{"):])
        records[record["url"]] = record
    return records


def test_pagefind_indexes_both_languages_with_field_anchors(site: Path) -> None:
    if not (site / "pagefind").is_dir():
        pytest.skip("pagefind is not installed")
    records = _fragments(site)
    en, zh = records["/en/format/"], records["/zh/format/"]
    assert en["meta"]["title"] == "Runbook format reference" and en["filters"]["lang"] == ["en"]
    assert zh["meta"]["title"] == "Runbook 格式参考" and zh["filters"]["lang"] == ["zh"]
    # Pagefind segments the text with zero-width spaces; compare without them.
    assert "conclusions.<conclusion-id>.fixes[].effect" in re.sub("[\u200b ]", "", en["content"])
    assert "硬性时限" in zh["content"].replace("\u200b", "")
    anchors = {a["id"] for a in zh["anchors"]}
    assert {"steps.check.timeout", "check-types.gpu", "example"} <= anchors

"""The site builder on the repository's content (plus a hostile runbook): pages, links, safety."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from runbook.library.runbooks import load_library
from runbook.site.build import build_site, load_content
from runbook.site.markdown import MarkdownRenderer, slugify
from runbook.site.pages import Page
from runbook.site.theme import Theme, find_theme

ROOT = Path(__file__).resolve().parents[2]
XSS = ROOT / "tests" / "data" / "site"


class _Links(HTMLParser):
    """hrefs/srcs, element ids, and every tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for key in ("href", "src"):
            if found.get(key) and tag not in ("marker",):
                self.links.append(str(found[key]))


def parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text("utf-8"))
    return parser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("site")
    content, problems = load_content("https://example.org/runbook/edit/main")
    hostile = load_library([XSS]).runbooks()
    content.runbooks = sorted([*content.runbooks, *hostile], key=lambda r: r.id)
    result = build_site(content, Theme(find_theme(ROOT / "site")), out, search=False)
    assert result.pages > 50
    return out, content


def test_every_runbook_and_article_is_in_both_trees(site) -> None:
    out, content = site
    for lang in ("en", "zh"):
        for rb in content.runbooks:
            page = out / lang / "runbooks" / rb.id / "index.html"
            assert page.exists(), page
            html = page.read_text("utf-8")
            assert f'<html lang="{"zh-CN" if lang == "zh" else "en"}">' in html
        for slug in content.kb.articles:
            assert (out / lang / "kb" / slug / "index.html").exists()
        for name in ("index.html", "symptoms/index.html", "categories/index.html", "checks/index.html",
                     "search/index.html"):
            assert (out / lang / name).exists()
        for doc in content.checks:
            assert (out / lang / "checks" / doc.name / "index.html").exists()
    assert (out / "index.html").exists() and (out / "404.html").exists()


def test_every_internal_link_resolves(site) -> None:
    out, _ = site
    ids_by_file: dict[Path, set[str]] = {}
    pages = sorted(out.rglob("*.html"))
    for page in pages:
        ids_by_file[page] = parse(page).ids
    broken = []
    for page in pages:
        if page.name == "404.html":
            continue  # absolute links: served for any URL
        base = "file://" + str(page)
        for link in parse(page).links:
            url = urlparse(urljoin(base, link))
            if url.scheme != "file":
                continue
            target = Path(unquote(url.path))
            if target.is_dir() or link.endswith("/") or not target.suffix:
                target = target / "index.html"
            if "pagefind" in target.parts:
                continue  # built by Pagefind, not in this build (search=False)
            if not target.exists():
                broken.append(f"{page.relative_to(out)}: {link}")
            elif url.fragment and unquote(url.fragment) not in ids_by_file.get(target, set()):
                broken.append(f"{page.relative_to(out)}: {link} (no such anchor)")
    assert broken == []


def test_language_switch_points_at_the_same_page(site) -> None:
    out, _ = site
    en = (out / "en" / "runbooks" / "training-hang" / "index.html").read_text("utf-8")
    assert 'href="../../../zh/runbooks/training-hang/" hreflang="zh"' in en
    zh = (out / "zh" / "kb" / "gkd-hang-quick-card" / "index.html").read_text("utf-8")
    assert 'href="../../../en/kb/gkd-hang-quick-card/" hreflang="en"' in zh


def test_runbook_page_has_flowchart_steps_conclusions_and_command(site) -> None:
    out, content = site
    rb = next(r for r in content.runbooks if r.id == "training-hang")
    page = parse(out / "en" / "runbooks" / "training-hang" / "index.html")
    nodes = [a for tag, a in page.tags if tag == "g" and "fc-node" in (a.get("class") or "").split()]
    externals = {t for s in rb.steps.values() for t in [b.goto for b in s.branches] + [s.default or ""]
                 if ":" in t}
    assert len(nodes) == len(rb.steps) + len(rb.conclusions) + len(externals)
    assert set(rb.steps) | set(rb.conclusions) <= page.ids
    html = (out / "en" / "runbooks" / "training-hang" / "index.html").read_text("utf-8")
    assert "runbook run training-hang --nodes &#39;gpu[01-16]&#39; --set log=&lt;path&gt;" in html
    assert "https://example.org/runbook/edit/main/runbooks/training-hang.yaml" in html
    assert f"Version {rb.version}" in html and rb.changelog[0].version in html
    assert 'class="badge effect effect-disruptive"' in html


def test_category_index_shows_llama3_shares(site) -> None:
    out, _ = site
    html = (out / "en" / "categories" / "index.html").read_text("utf-8")
    assert "148 / 419 = 35.3%" in html  # Faulty GPU
    assert "72 / 419 = 17.2%" in html  # GPU HBM3 memory
    zh = (out / "zh" / "categories" / "index.html").read_text("utf-8")
    assert "占 Llama 3 中断的比例" in zh


def test_hostile_runbook_renders_inert(site) -> None:
    out, _ = site
    for lang in ("en", "zh"):
        page = out / lang / "runbooks" / "xss-attempt" / "index.html"
        parsed = parse(page)
        scripts = [a for tag, a in parsed.tags if tag == "script"]
        assert all(a.get("src", "").endswith("static/site.js") for a in scripts), scripts
        assert not [tag for tag, _ in parsed.tags if tag in ("iframe", "img")]
        assert not [link for link in parsed.links if link.lower().startswith("javascript:")]
        handlers = [(tag, k) for tag, a in parsed.tags for k in a if k.startswith("on")]
        assert handlers == []
        assert "&lt;script&gt;window.__xss" in page.read_text("utf-8")


def test_markdown_is_sanitised_and_headings_get_unicode_anchors() -> None:
    md = MarkdownRenderer(lambda kind, target, anchor: f"/{kind}/{target}/#{anchor}")
    out = md.render("## 问题现象\n\n## 问题现象\n\n<b onclick=x>hi</b> [x](javascript:alert(1)) "
                    "[rb](runbook:training-hang#read-log)")
    assert [h.anchor for h in out.headings] == ["问题现象", "问题现象-2"]
    assert "<b onclick" not in out.html and "&lt;b onclick=x&gt;" in out.html
    assert 'href="javascript:' not in out.html
    assert 'href="/runbook/training-hang/#read-log"' in out.html
    assert out.links == ["runbook:training-hang"]
    assert slugify("NCCL 超时 / Timeout!") == "nccl-超时-timeout"


def test_relative_links_between_pages() -> None:
    page = Page("en/runbooks/x/index.html", "runbook.html", "en")
    assert page.href("") == "../../../"
    assert page.href("zh/runbooks/x/") == "../../../zh/runbooks/x/"
    assert page.href("en/kb/y/#a") == "../../kb/y/#a"
    assert page.other_language() == "zh/runbooks/x/index.html"
    assert re.fullmatch(r"\.\./\.\./\.\./static/style\.css", page.href("static/style.css"))

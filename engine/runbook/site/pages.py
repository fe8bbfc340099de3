"""Which pages the site has, where each lives, and what its template is given.

Every page exists once per language, at the same path under `en/` and `zh/`, so the
language switch is the same path with the other prefix. Links between pages are
relative, so the site works from any base URL (or a plain file server).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from runbook.format import taxonomy
from runbook.format.model import LANGS, Conclusion, Runbook, Step
from runbook.library.checkdocs import CheckDoc
from runbook.library.kb import Article, KnowledgeBase

LLAMA3_TOTAL = 419  # unexpected interruptions in the Llama 3 paper's Table 5


@dataclass
class Page:
    path: str  # file path inside the output directory, e.g. "en/runbooks/x/index.html"
    template: str
    lang: str | None  # None: a page outside the language trees (start page, 404)
    context: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The page's URL path from the site root ("en/runbooks/x/")."""
        return self.path.removesuffix("index.html")

    def href(self, target: str) -> str:
        """A relative link from this page to `target` (a path from the site root, maybe #anchor)."""
        target, _, anchor = target.partition("#")
        return _relative(target, posixpath.dirname(self.path) or ".") + (f"#{anchor}" if anchor else "")

    def other_language(self) -> str | None:
        if self.lang is None:
            return None
        other = next(lang for lang in LANGS if lang != self.lang)
        return other + self.path[len(self.lang):]


@lru_cache(maxsize=65536)
def _relative(target: str, here: str) -> str:
    # A page links to the same targets many times (header, lists): relpath once each.
    rel = posixpath.relpath(target or ".", here)
    if (not target or target.endswith("/")) and not rel.endswith("/"):
        rel += "/"
    return rel


def runbook_url(lang: str, runbook_id: str, anchor: str = "") -> str:
    return f"{lang}/runbooks/{runbook_id}/" + (f"#{anchor}" if anchor else "")


def article_url(lang: str, slug: str, anchor: str = "") -> str:
    return f"{lang}/kb/{slug}/" + (f"#{anchor}" if anchor else "")


def check_url(lang: str, check_type: str) -> str:
    return f"{lang}/checks/{check_type}/"


def category_url(lang: str, taxonomy_id: str) -> str:
    return f"{lang}/categories/#{taxonomy_id}"


def format_url(lang: str, anchor: str = "") -> str:
    """The runbook format reference; `anchor` is a field's (`steps.check.timeout`)."""
    return f"{lang}/format/" + (f"#{anchor}" if anchor else "")


@dataclass
class Content:
    """Everything the site shows, loaded once. The cached properties are indexes over it:
    whoever changes `runbooks` or `kb` calls `forget_indexes`."""

    runbooks: list[Runbook]
    kb: KnowledgeBase
    checks: list[CheckDoc]
    repo_url: str  # e.g. "https://github.com/org/runbook/blob/main"; "" hides the edit links
    source_path: Callable[[str], str]  # a file's path inside the repository, for edit links
    # (page path, kind, Markdown) -> what it renders to; None: not kept (a one-off build)
    markdown_cache: dict[tuple[str, str, str], Any] | None = None

    def forget_indexes(self) -> None:
        """Drop every cached index (each cached_property), so the next use sees the edited library."""
        for name, attr in vars(type(self)).items():
            if isinstance(attr, cached_property):
                self.__dict__.pop(name, None)

    def edit_url(self, file: str) -> str:
        return f"{self.repo_url.rstrip('/')}/{self.source_path(file)}" if self.repo_url else ""

    def articles_linking(self, runbook: Runbook) -> list[str]:
        """Slugs of articles that name this runbook, or that its see_also names."""
        return self._links[0].get(runbook.id, [])

    def runbooks_for_article(self, slug: str) -> list[Runbook]:
        return self._links[1].get(slug, [])

    def handovers_into(self, runbook_id: str) -> list[tuple[Runbook, Step]]:
        """Steps of other runbooks whose branches hand over to this one."""
        return self._handovers.get(runbook_id, [])

    def articles_in(self, lang: str) -> dict[str, Article]:
        """Every article by slug (sorted), in `lang` where it has that version."""
        return self._articles_by_lang[lang]

    @cached_property
    def by_id(self) -> dict[str, Runbook]:
        return {rb.id: rb for rb in self.runbooks}

    @cached_property
    def _articles_by_lang(self) -> dict[str, dict[str, Article]]:
        # Every page's template gets these: built once per language, not once per page.
        articles = sorted(self.kb.articles.items())
        return {lang: {slug: v.get(lang) or next(iter(v.values())) for slug, v in articles} for lang in LANGS}

    @cached_property
    def _links(self) -> tuple[dict[str, list[str]], dict[str, list[Runbook]]]:
        # One pass over everything (not one per page): the site has thousands of pages.
        pairs: set[tuple[str, str]] = set()
        for rb in self.runbooks:
            for c in rb.conclusions.values():
                pairs.update((rb.id, link[3:].split("#")[0]) for link in c.see_also if link.startswith("kb:"))
        for slug, versions in self.kb.articles.items():
            pairs.update((rid, slug) for a in versions.values() for rid in a.runbooks)
        by_id = {rb.id: rb for rb in self.runbooks}
        articles: dict[str, list[str]] = {}
        runbooks: dict[str, list[Runbook]] = {}
        for rid, slug in sorted(pairs):
            if slug in self.kb.articles and rid in by_id:
                articles.setdefault(rid, []).append(slug)
                runbooks.setdefault(slug, []).append(by_id[rid])
        return articles, runbooks

    @cached_property
    def _handovers(self) -> dict[str, list[tuple[Runbook, Step]]]:
        into: dict[str, list[tuple[Runbook, Step]]] = {}
        for other in self.runbooks:
            for step in other.steps.values():
                targets = {t.split(":", 1)[0] for t in [b.goto for b in step.branches] + [step.default or ""]
                           if ":" in t}
                for rid in sorted(targets):
                    into.setdefault(rid, []).append((other, step))
        return into


def all_pages(content: Content) -> list[Page]:
    pages = [Page("index.html", "start.html", None), Page("404.html", "404.html", None)]
    for lang in LANGS:
        pages.append(Page(f"{lang}/index.html", "home.html", lang))
        pages.append(Page(f"{lang}/search/index.html", "search.html", lang))
        pages.append(Page(f"{lang}/triage/index.html", "triage.html", lang))
        pages.append(Page(f"{lang}/symptoms/index.html", "symptoms.html", lang))
        pages.append(Page(f"{lang}/categories/index.html", "categories.html", lang))
        pages.append(Page(f"{lang}/checks/index.html", "checks.html", lang))
        pages.append(Page(format_url(lang) + "index.html", "schema.html", lang))
        pages.extend(Page(runbook_url(lang, rb.id) + "index.html", "runbook.html", lang,
                          {"runbook": rb}) for rb in content.runbooks)
        pages.extend(Page(article_url(lang, slug) + "index.html", "article.html", lang,
                          {"slug": slug}) for slug in sorted(content.kb.articles))
        pages.extend(Page(check_url(lang, doc.name) + "index.html", "check.html", lang,
                          {"check": doc}) for doc in content.checks)
    return pages


# -- indexes --


def primary_group(runbook: Runbook) -> str:
    """The taxonomy group most of a runbook's conclusions belong to (for the symptom index)."""
    categories = taxonomy.load()
    counts: dict[str, int] = {}
    for conclusion in runbook.conclusions.values():
        for tid in conclusion.taxonomy:
            group = categories[tid].group if tid in categories else "other"
            counts[group] = counts.get(group, 0) + 1
    order = list(dict.fromkeys(c.group for c in categories.values()))
    return min(counts, key=lambda g: (-counts[g], order.index(g) if g in order else 99)) \
        if counts else "other"


def symptom_index(content: Content, lang: str) -> list[dict[str, Any]]:
    """Symptoms grouped by area: [{group, entries: [{text, runbook}]}], areas in taxonomy order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for rb in content.runbooks:
        entries = groups.setdefault(primary_group(rb), [])
        entries.extend({"text": s.get(lang), "runbook": rb} for s in rb.symptoms)
    order = list(dict.fromkeys(c.group for c in taxonomy.load().values())) + ["other"]
    return [{"group": g, "entries": groups[g]} for g in order if g in groups]


@dataclass
class CategoryRow:
    id: str
    text: str
    conclusions: list[tuple[Runbook, Conclusion]]
    articles: list[Article]
    llama3: list[tuple[str, int, float]]  # (row, count, share of all interruptions in %)


def category_index(content: Content, lang: str) -> list[tuple[str, list[CategoryRow]]]:
    rows: dict[str, list[CategoryRow]] = {}
    for cat in taxonomy.load().values():
        concluded = [(rb, c) for rb in content.runbooks for c in rb.conclusions.values()
                     if cat.id in c.taxonomy]
        articles = [versions[lang] for versions in content.kb.articles.values()
                    if lang in versions and cat.id in versions[lang].taxonomy]
        rows.setdefault(cat.group, []).append(CategoryRow(
            cat.id, cat.zh if lang == "zh" else cat.en, concluded, articles, _llama3_rows(cat.llama3)))
    return list(rows.items())


def _llama3_rows(llama3: dict[str, Any] | None) -> list[tuple[str, int, float]]:
    if not llama3:
        return []
    rows = [llama3, *llama3.get("also", [])]
    return [(str(r["row"]), int(r["count"]), 100.0 * int(r["count"]) / LLAMA3_TOTAL) for r in rows]

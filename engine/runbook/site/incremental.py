"""Rebuild only what one saved file changes, for `runbook site serve`.

A runbook file: its own pages (both languages), and of the pages that show something of it
(the home, symptoms and categories pages, the articles it links with, the runbooks it hands
over to or that hand over to it, the pages of the check types its steps use) those whose part
of it changed (`_shown`); the triage data when its signatures changed. A runbook added,
removed or given another id: all of those. An article: its pages, the runbooks it links with,
the index pages. The search index is then rebuilt from the written pages by `SearchRefresher`,
in the background (Pagefind cannot take a page out of an index), so the page reload does not
wait for it.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runbook.format.model import LANGS, Runbook
from runbook.format.problems import errors
from runbook.site import pages as P
from runbook.site import search_reuse
from runbook.site.build import SEARCH_OPTIONS, index_for_search, render_pages
from runbook.site.theme import Theme
from runbook.site.triage_export import triage_data
from runbook.site.triage_export import write as write_triage_data

INDEX_TEMPLATES = ("home.html", "symptoms.html", "categories.html")


class ContentError(Exception):
    """The saved file does not load: the site keeps its last good version."""


@dataclass
class Rebuilt:
    pages: int
    seconds: float
    what: str  # one line for the console


class SiteSession:
    """The loaded content and the built site in `out`, kept up to date file by file."""

    def __init__(self, content: P.Content, theme: Theme, out: Path) -> None:
        self.content, self.theme, self.out = content, theme, out
        content.markdown_cache = {}  # Markdown rendered by one rebuild is kept for the next

    def changed(self, files: Iterable[Path]) -> Rebuilt:
        """Bring the site up to date with the changed (saved, added or removed) files."""
        begin = time.perf_counter()
        paths: set[str] = set()
        names: list[str] = []
        for file in files:
            if file.suffix == ".md":
                paths |= self._article_changed(file)
            else:
                paths |= self._runbook_changed(file)
            names.append(file.name)
        pages = [page for page in P.all_pages(self.content) if page.path in paths]
        render_pages(pages, self.content, self.theme, self.out)
        return Rebuilt(len(pages), time.perf_counter() - begin, ", ".join(names))

    # -- runbooks --

    def _runbook_changed(self, file: Path) -> set[str]:
        from runbook.library.runbooks import load_library

        key = str(file)
        old = [rb for rb in self.content.runbooks if _same_file(rb.path, file)]
        new: Runbook | None = None
        if file.exists():
            result = load_library([file]).results[0]
            broken = errors(result.problems)
            if result.runbook is None:
                raise ContentError(str(broken[0]) if broken else f"{key}: does not load")
            new = result.runbook
            clash = [rb for rb in self.content.runbooks if rb.id == new.id and not _same_file(rb.path, file)]
            if clash:
                raise ContentError(f"{key}: runbook id {new.id!r} is also defined in {clash[0].path}")
        changed = [*old, *([new] if new else [])]
        before = self._neighbours(changed)
        self._set_runbooks([rb for rb in self.content.runbooks if rb not in old] + ([new] if new else []))
        after = self._neighbours(changed)
        for gone in {rb.id for rb in old} - ({new.id} if new else set()):
            for lang in LANGS:
                shutil.rmtree(self.out / P.runbook_url(lang, gone), ignore_errors=True)
        previous = old[0] if len(old) == 1 else None
        if previous is None or new is None or previous.id != new.id:  # added, removed or renamed
            write_triage_data(self.content.runbooks, self.out, self.content.kb)
            return {page for kind in before | after for page in kind[1]} | self._index_pages(INDEX_TEMPLATES)
        if triage_data([previous]) != triage_data([new]):
            write_triage_data(self.content.runbooks, self.out, self.content.kb)
        shown = {kind for kind, view in _shown(previous).items() if view != _shown(new)[kind]}
        pages = set(_runbook_pages([new.id]))
        pages |= {page for kind, paths in before | after if kind in shown for page in paths}
        return pages | self._index_pages(tuple(f"{kind}.html" for kind in shown if kind in _INDEX_KINDS))

    def _neighbours(self, changed: list[Runbook]) -> set[tuple[str, frozenset[str]]]:
        """(kind, pages) of what shows something of `changed`, by what it shows (see `_shown`)."""
        content = self.content
        found: set[tuple[str, frozenset[str]]] = set()
        for rb in changed:
            handovers = {other.id for other, _step in content.handovers_into(rb.id)} | _handover_targets(rb)
            checks = {step.check.type for step in rb.steps.values() if step.check is not None}
            found |= {("self", frozenset(_runbook_pages([rb.id]))),
                      ("handovers", frozenset(_runbook_pages(handovers))),
                      ("articles", frozenset(_article_pages(content.articles_linking(rb)))),
                      ("checks", frozenset(P.check_url(lang, name) + "index.html"
                                           for lang in LANGS for name in checks))}
        return found

    def _set_runbooks(self, runbooks: list[Runbook]) -> None:
        self.content.runbooks = sorted(runbooks, key=lambda r: r.id)
        self.content.forget_indexes()

    # -- articles --

    def _article_changed(self, file: Path) -> set[str]:
        from runbook.library.kb import kb_dirs, load_kb

        slug = file.parent.name
        before = {rb.id for rb in self.content.runbooks_for_article(slug)}
        kb = load_kb(kb_dirs())
        broken = [p for p in errors(kb.problems) if _same_file(p.file, file)]
        if broken:
            raise ContentError(str(broken[0]))
        self.content.kb = kb
        self.content.forget_indexes()
        write_triage_data(self.content.runbooks, self.out, kb)  # the page compares error lines with articles
        after = {rb.id for rb in self.content.runbooks_for_article(slug)}
        if slug not in kb.articles:
            for lang in LANGS:
                shutil.rmtree(self.out / P.article_url(lang, slug), ignore_errors=True)
        return {*_article_pages([slug]), *_runbook_pages(before | after), *self._index_pages(INDEX_TEMPLATES)}

    def _index_pages(self, templates: tuple[str, ...]) -> set[str]:
        return {page.path for page in P.all_pages(self.content) if page.template in templates}


def _same_file(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


_INDEX_KINDS = ("home", "symptoms", "categories")


def _shown(rb: Runbook) -> dict[str, Any]:
    """What other pages show of a runbook, by the kind of page: a page is rendered again only
    when what it shows changed. Keep in step with the templates (home.html and macros.html's
    card, symptoms.html, categories.html, article.html, check.html, runbook.html's hand-overs)."""
    steps = list(rb.steps.values())
    return {
        "home": (rb.title, rb.summary, rb.symptoms[:1]),
        "symptoms": (rb.title, tuple(rb.symptoms), P.primary_group(rb)),
        "categories": tuple((c.id, c.title, tuple(c.taxonomy)) for c in rb.conclusions.values()),
        "articles": (rb.title, tuple(tuple(c.see_also) for c in rb.conclusions.values())),
        "checks": tuple((s.id, s.title, s.check.type if s.check else None) for s in steps),
        "handovers": (rb.start, tuple((s.id, s.title, tuple(b.goto for b in s.branches), s.default)
                                      for s in steps)),
    }


def _handover_targets(rb: Runbook) -> set[str]:
    targets = [b.goto for step in rb.steps.values() for b in step.branches]
    targets += [step.default or "" for step in rb.steps.values()]
    return {t.split(":", 1)[0] for t in targets if ":" in t}


def _runbook_pages(rids: Iterable[str]) -> list[str]:
    return [P.runbook_url(lang, rid) + "index.html" for lang in LANGS for rid in rids]


def _article_pages(slugs: Iterable[str]) -> list[str]:
    return [P.article_url(lang, slug) + "index.html" for lang in LANGS for slug in slugs]


class SearchRefresher:
    """Rebuilds out/pagefind from the written pages in a background thread (Pagefind's CLI into
    a staging folder, then swapped in); a change that comes in while it runs is picked up by
    one more run after it."""

    def __init__(self, out: Path, log: Callable[[str], None] = print) -> None:
        self.out, self._log = out, log
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="search-refresh", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wanted.set()

    def stop(self) -> None:
        self._stop.set()
        self._wanted.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            if self._stop.is_set():
                return
            self._wanted.clear()
            self._refresh()

    def _refresh(self) -> None:
        begin = time.perf_counter()
        staging = self.out / ".pagefind-new"
        shutil.rmtree(staging, ignore_errors=True)
        fingerprint = search_reuse.site_fingerprint(self.out, SEARCH_OPTIONS)
        if search_reuse.is_current(self.out / "pagefind", fingerprint):
            return  # a save that changed no page (a comment, whitespace): the index still fits
        error = index_for_search(self.out, staging)
        if error is not None:
            self._log(f"runbook site serve: search index not refreshed: {error}")
            return
        search_reuse.remember(staging, fingerprint)
        old = self.out / ".pagefind-old"
        shutil.rmtree(old, ignore_errors=True)
        live = self.out / "pagefind"
        if live.exists():
            live.rename(old)
        staging.rename(live)  # the swap: a search never sees half a bundle
        shutil.rmtree(old, ignore_errors=True)
        self._log(f"runbook site serve: search index refreshed ({time.perf_counter() - begin:.1f} s)")

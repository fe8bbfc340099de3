"""`runbook site build`: runbooks + knowledge base + check registry -> a static site in DIR.

Pages are rendered with the theme's Jinja2 templates (autoescaped), Markdown with
markdown-it (raw HTML off), flowcharts as inline SVG, in forked workers on a big site;
then Pagefind indexes the HTML so the site can be searched offline, in English and Chinese.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from runbook.format import taxonomy
from runbook.format.model import LANGS, Runbook, Text
from runbook.format.problems import Problem, errors
from runbook.run.redact import Redactor
from runbook.site import fragments, search_reuse
from runbook.site import pages as P
from runbook.site.markdown import MarkdownRenderer, Rendered
from runbook.site.theme import Theme
from runbook.site.triage_export import write as write_triage_data

SEARCH_LANGUAGE = "zh"  # one Pagefind index for both languages; see docs in site/README.md
SEARCH_OPTIONS = ("--force-language", SEARCH_LANGUAGE)  # what the index depends on besides the HTML


@dataclass
class BuildResult:
    out: Path
    pages: int
    seconds: float
    # From the pages written to the end: Pagefind, and what runs meanwhile (a first build's
    # flowcharts, the static files, the triage page's data).
    search_seconds: float
    search_error: str | None  # why the search index is missing, or None
    search_reused: bool = False  # the earlier bundle was kept: the pages it indexed are unchanged


def load_content(repo_url: str = "") -> tuple[P.Content, list[Problem]]:
    """The runbooks on the search path, the knowledge base and the check registry; and the
    errors found loading them (what failed to load is left out, everything else is there)."""
    from runbook.library.checkdocs import describe_all
    from runbook.library.kb import check_links, kb_dirs, load_kb
    from runbook.library.runbooks import load_library, search_path

    library = load_library(search_path())
    kb = load_kb(kb_dirs())
    runbooks = {r.id: r for r in library.runbooks()}
    broken = errors([*library.problems, *kb.problems, *check_links(kb, runbooks)])
    content = P.Content(sorted(runbooks.values(), key=lambda r: r.id), kb, describe_all(), repo_url,
                        repository_path)
    return content, broken


def repository_path(file: str) -> str:
    """A content file's path inside its repository (for edit links): from runbooks/ or kb/ on."""
    parts = Path(file).resolve().parts
    for anchor in ("runbooks", "kb"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[index:])
    return Path(file).name


def build_site(content: P.Content, theme: Theme, out: Path, *, search: bool = True) -> BuildResult:
    begin = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    bundle = out / "pagefind"
    parked = search_reuse.park(bundle, out) if search else None
    _clear(out)
    pages = P.all_pages(content)
    # With no earlier bundle to keep, Pagefind can start on pages whose flowcharts are not drawn
    # yet: a chart is data-pagefind-ignore, so the index is the same byte for byte (tested).
    later = search and parked is None
    _render(pages, content, theme, out, charts_later=later)
    rendered = time.perf_counter()
    indexing: subprocess.Popen[str] | str | None = "not built (--no-search)"
    reused = False
    charts: list[tuple[str, str]] = []  # a first build's flowcharts, put in once Pagefind has read the pages
    fingerprint = None  # of the pages as Pagefind indexes them, once they are all written
    # Pagefind reads only the HTML and keeps about 1.5 of 2 cores busy: what else the build does
    # (the charts, the static files, the triage page's data) is done while it runs.
    try:
        if later:
            indexing = start_index(out)
            # In this process: beside Pagefind's threads, more workers only make them wait.
            charts = _map_pages(pages, content, theme, out, _draw_indices, jobs=1)
        elif search:
            fingerprint = search_reuse.site_fingerprint(out, SEARCH_OPTIONS)
            reused = search_reuse.reuse(parked, bundle, fingerprint)
            indexing = None if reused else start_index(out)
        copy_static(theme, out)
        write_triage_data(content.runbooks, out, content.kb)  # what the triage page matches logs with
        error = finish_index(indexing) if isinstance(indexing, subprocess.Popen) else indexing
    except BaseException:
        if isinstance(indexing, subprocess.Popen):
            indexing.kill()
            indexing.wait()
        raise
    if later:
        _put_charts(out, charts)  # Pagefind has read every page: the charts go in
    if search and error is None and not reused:
        # a first build's pages are whole only now that the charts are in
        search_reuse.remember(bundle, fingerprint or search_reuse.site_fingerprint(out, SEARCH_OPTIONS))
    done = time.perf_counter()
    return BuildResult(out, len(pages), done - begin, done - rendered, error, reused)


def copy_static(theme: Theme, out: Path) -> None:
    for source in theme.static_files():
        target = out / "static" / source.relative_to(theme.root / "static")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def index_for_search(out: Path, bundle: Path | None = None) -> str | None:
    """Run Pagefind's CLI over the built HTML (it indexes with every core); write the bundle to
    `bundle` (default out/pagefind); return why it failed, or None."""
    started = start_index(out, bundle)
    return started if isinstance(started, str) else finish_index(started)


def start_index(out: Path, bundle: Path | None = None) -> subprocess.Popen[str] | str:
    """Start Pagefind's CLI over the HTML under `out`; the process, or why it did not start."""
    command = [sys.executable, "-m", "pagefind", "--site", str(out), *SEARCH_OPTIONS, "--silent"]
    if bundle is not None:
        command += ["--output-path", str(bundle.resolve())]
    try:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        return f"pagefind did not run: {exc}"


def finish_index(process: subprocess.Popen[str]) -> str | None:
    """Wait for a started Pagefind (at most 10 minutes); why it failed, or None."""
    try:
        stdout, stderr = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return "pagefind did not finish in 600 s"
    except BaseException:  # Ctrl-C during the build: leave no indexer behind
        process.kill()
        raise
    if process.returncode != 0:
        lines = (stderr or stdout).strip().splitlines()
        reason = lines[-1] if lines else f"exit code {process.returncode}"
        if "No module named pagefind" in reason:
            reason = "pagefind is not installed (pip install 'runbook[site]')"
        return reason
    return None


# Set just before forking the render workers; they inherit it instead of unpickling it.
_JOB: tuple[list[P.Page], P.Content, Theme, Path] | None = None
CHUNK = 8  # pages per render task
FORK_MIN_PAGES = 200  # a smaller site renders faster in this process than in forked workers
# Where a runbook page's flowchart goes when the page is written before its chart is drawn
# (a comment inside the chart's data-pagefind-ignore element: nothing Pagefind reads).
CHART_MARK = "<!-- runbook-flowchart -->"
_charts_later = False  # set by _render while pages are rendered with CHART_MARK for their chart


def _map_pages(pages: list[P.Page], content: P.Content, theme: Theme, out: Path,
               work: Callable[[list[int]], list[Any]], *, jobs: int | None = None) -> list[Any]:
    """`work` over every page (by index) and its results; on a big site, the pages are split
    over forked processes (`jobs`, default one per core)."""
    global _JOB
    _JOB = (pages, content, theme, out)
    workers = jobs or int(os.environ.get("RUNBOOK_SITE_JOBS") or min(os.cpu_count() or 1, 8))
    try:
        forking = "fork" in multiprocessing.get_all_start_methods()
        if workers <= 1 or len(pages) < FORK_MIN_PAGES or not forking:
            return work(list(range(len(pages))))
        # Small tasks handed out as workers free up: the cores stay even.
        tasks = [list(range(i, min(i + CHUNK, len(pages)))) for i in range(0, len(pages), CHUNK)]
        pool = multiprocessing.get_context("fork").Pool(workers, initializer=_worker_init)
        try:
            results = [item for done in pool.imap_unordered(work, tasks) for item in done]
            pool.close()  # not terminate(): a worker killed holding the queue's lock hangs the others
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()
        return results
    finally:
        _JOB = None


def _worker_init() -> None:
    # The CLI's SIGTERM handler raises KeyboardInterrupt; a worker must just die on terminate().
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _render_indices(indices: list[int]) -> list[Any]:
    assert _JOB is not None
    pages, content, theme, out = _JOB
    render_pages([pages[i] for i in indices], content, theme, out)
    return []


def _render(pages: list[P.Page], content: P.Content, theme: Theme, out: Path, *, charts_later: bool) -> None:
    """Render and write every page; with `charts_later`, a runbook page gets CHART_MARK for its
    flowchart (set before the workers fork: they inherit it)."""
    global _charts_later
    _charts_later = charts_later
    try:
        _map_pages(pages, content, theme, out, _render_indices)
    finally:
        _charts_later = False


def _draw_indices(indices: list[int]) -> list[tuple[str, str]]:
    """(page path, its flowchart, redacted) of the runbook pages among `indices`."""
    assert _JOB is not None
    pages, content, _, _ = _JOB
    redactor = _redactor()
    return [(pages[i].path, redactor.credentials(_flowchart_of(pages[i], content)))
            for i in indices if pages[i].template == "runbook.html"]


def _put_charts(out: Path, charts: list[tuple[str, str]]) -> None:
    for path, svg in charts:
        target = out / path
        html = target.read_text("utf-8")
        target.write_text(html.replace(CHART_MARK, svg, 1), "utf-8")


def render_pages(pages: list[P.Page], content: P.Content, theme: Theme, out: Path) -> None:
    """Render and write pages in this process."""
    redactor = _redactor()
    made: set[Path] = set()
    for page in pages:
        html = redactor.credentials(render_page(page, content, theme))
        target = out / page.path
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.write_text(html, "utf-8")


@functools.cache
def _redactor() -> Redactor:
    return Redactor()  # a runbook from a pull request may quote a real token


def _clear(out: Path) -> None:
    """Remove what an earlier build wrote (only our own top-level entries)."""
    for name in (*LANGS, "static", "pagefind", "index.html", "404.html"):
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


# -- rendering --


def render_page(page: P.Page, content: P.Content, theme: Theme) -> str:
    lang = page.lang or "en"
    helpers = _helpers(page, content, theme, lang)
    context: dict[str, Any] = {**helpers, **page.context}
    extra = _PAGE_CONTEXT.get(page.template)
    if extra:
        context.update(extra(page, content, helpers))
    return theme.env.get_template(page.template).render(context)


def _helpers(page: P.Page, content: P.Content, theme: Theme, lang: str) -> dict[str, Any]:
    renderer = MarkdownRenderer(lambda kind, target, anchor: _content_href(page, lang, kind, target, anchor))
    strings = theme.strings[lang]
    other = page.other_language()

    def text(value: Text | str | None) -> str:
        return value.get(lang) if isinstance(value, Text) else (value or "")

    return {
        "page": page, "lang": lang, "content": content,
        "t": lambda key: strings[key], "strings": strings, "all_strings": theme.strings,
        "text": text,
        "md": lambda value: Markup(_markdown(page, "block", text(value), content, renderer.render).html),
        "mdi": lambda value: Markup(_markdown(page, "inline", text(value), content, renderer.render_inline)),
        "href": page.href,
        "root": page.href(""),
        "other_lang": next(x for x in LANGS if x != lang),
        "other_url": page.href(other.removesuffix("index.html")) if other else None,
        "runbook_href": lambda rid, anchor="": page.href(P.runbook_url(lang, rid, anchor)),
        "article_href": lambda slug, anchor="": page.href(P.article_url(lang, slug, anchor)),
        "check_href": lambda name: page.href(P.check_url(lang, name)),
        "category_href": lambda tid: page.href(P.category_url(lang, tid)),
        "format_href": lambda anchor="": page.href(P.format_url(lang, anchor)),
        "link_href": lambda link: _see_also_href(page, lang, link),
        "categories": taxonomy.load(),
        "runbooks": content.runbooks,
        "articles": content.articles_in(lang),
    }


def _see_also_href(page: P.Page, lang: str, link: str) -> str:
    kind, _, rest = link.partition(":")
    target, _, anchor = rest.partition("#")
    return _content_href(page, lang, kind, target, anchor)


def _content_href(page: P.Page, lang: str, kind: str, target: str, anchor: str) -> str:
    """Where `runbook:ID#anchor` or `kb:SLUG#anchor` points, relative to `page`."""
    return page.href(P.runbook_url(lang, target, anchor) if kind == "runbook"
                     else P.article_url(lang, target, anchor))


def _handover_href(page: P.Page, content: P.Content, rid: str, step: str) -> str:
    # `other:start` names the other runbook's first step, whatever it is called.
    by_id = content.by_id
    target = by_id[rid].start if step == "start" and rid in by_id else step
    return page.href(P.runbook_url(page.lang or "en", rid, target))


def _flowchart_of(page: P.Page, content: P.Content) -> str:
    """A runbook page's flowchart (cached by its inputs)."""
    return fragments.flowchart(page.context["runbook"], page.lang or "en", lambda node_id: node_id,
                               lambda rid, step: _handover_href(page, content, rid, step))


def _runbook_context(page: P.Page, content: P.Content, h: dict[str, Any]) -> dict[str, Any]:
    rb: Runbook = page.context["runbook"]
    lang = h["lang"]

    svg = CHART_MARK if _charts_later else _flowchart_of(page, content)

    def goto_link(target: str) -> Markup:
        if ":" in target:
            rid, step = target.split(":", 1)
            link = Markup('<a class="goto external" href="{}">{}</a>')
            return link.format(_handover_href(page, content, rid, step), target)
        node = rb.steps.get(target) or rb.conclusions.get(target)
        title = node.title.get(lang) if node else ""
        return Markup('<a class="goto" href="#{}">{}</a> <span class="goto-title">{}</span>').format(
            target, target, title)

    return {
        "goto_link": goto_link,
        "flowchart": Markup(svg),
        "run_command": run_command(rb),
        "edit_url": content.edit_url(rb.path),
        "related_articles": content.articles_linking(rb),
        "entered_from": content.handovers_into(rb.id),
    }


def run_command(rb: Runbook) -> str:
    """The command line that runs this runbook, with its required params as placeholders."""
    parts = ["runbook", "run", rb.id, "--nodes", "'gpu[01-16]'"]
    for name, param in rb.params.items():
        if param.required or name == "log":  # `log` is optional but what people nearly always pass
            parts += ["--set", f"{name}=<{param.type}>"]
    return " ".join(parts)


def _article_context(page: P.Page, content: P.Content, h: dict[str, Any]) -> dict[str, Any]:
    slug = page.context["slug"]
    versions = content.kb.articles[slug]
    article = versions.get(h["lang"]) or next(iter(versions.values()))
    rendered = _article_body(page, h["lang"], article.body, content)
    return {
        "article": article,
        "body": Markup(rendered.html),
        "toc": [x for x in rendered.headings if x.level in (2, 3)],
        "related_runbooks": content.runbooks_for_article(slug),
        "edit_url": content.edit_url(article.path),
        "fallback_language": article.lang != h["lang"],
    }


def _article_body(page: P.Page, lang: str, body: str, content: P.Content) -> Rendered:
    renderer = MarkdownRenderer(lambda kind, target, anchor: _content_href(page, lang, kind, target, anchor))
    return _markdown(page, "article", body, content,
                     lambda source: fragments.article(page.path, source, renderer.render))


def _markdown(page: P.Page, kind: str, source: str, content: P.Content, render: Callable[[str], Any]) -> Any:
    """`render(source)` for this page; remembered where `content` keeps a cache (`site serve`:
    a saved runbook renders the pages that list it again, not every text on them)."""
    cache = content.markdown_cache
    if cache is None:
        return render(source)
    key = (page.path, kind, source)  # links in the text resolve relative to the page
    if key not in cache:
        cache[key] = render(source)
    return cache[key]


def _symptoms_context(page: P.Page, content: P.Content, h: dict[str, Any]) -> dict[str, Any]:
    return {"symptom_groups": P.symptom_index(content, h["lang"])}


def _categories_context(page: P.Page, content: P.Content, h: dict[str, Any]) -> dict[str, Any]:
    return {"category_groups": P.category_index(content, h["lang"]), "llama3_total": P.LLAMA3_TOTAL}


def _schema_context(page: P.Page, content: P.Content, h: dict[str, Any]) -> dict[str, Any]:
    from runbook.library.schemadoc import reference

    return {"reference": reference()}


_PAGE_CONTEXT: dict[str, Callable[[P.Page, P.Content, dict[str, Any]], dict[str, Any]]] = {
    "runbook.html": _runbook_context,
    "article.html": _article_context,
    "symptoms.html": _symptoms_context,
    "categories.html": _categories_context,
    "schema.html": _schema_context,
}

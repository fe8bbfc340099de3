"""Rendered pieces of pages kept between builds in the load cache, keyed by what they are made of.

A runbook's flowchart (laid out in pure Python: most of a runbook page's rendering time) and an
article's Markdown body (most of an article page's) are pure functions of a few inputs. Each is
stored in the load cache (library/cache.py's `Store`, folder `site/`) under the sha256 of:

- the engine's fingerprint (library/cache.py: the format, the loader, the taxonomy) and the
  bytes of the site code that draws them (`_CODE`): new code never reads an old entry;
- a flowchart: the runbook's id, start, title, its steps, branches, defaults and conclusions
  as the chart shows them in the page's language, and every link the chart draws (a hand-over
  to another runbook's `start` follows that runbook);
- an article body: the page's path (links are relative to it) and the Markdown text.

A page built from cached pieces is byte for byte the page rendered without them (tests/site/
test_fragments.py). Entries are plain strings and tuples (marshal, behind a checksum), so a
damaged entry is rendered again, never trusted; deleting the folder is always safe.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runbook.format.model import Runbook
from runbook.library.cache import PACKAGE, Store, cache_root, key_of
from runbook.site.flowchart import flowchart_svg
from runbook.site.markdown import Heading, Rendered

KIND = "site"  # the folder under the load cache
# The code a cached piece depends on besides the runbook model: the chart, Markdown, the page
# URLs links resolve to, the link resolvers, and the display width titles are wrapped by.
_CODE = ("site/flowchart.py", "site/markdown.py", "site/pages.py", "site/build.py", "site/fragments.py",
         "i18n/textwidth.py")


@functools.cache
def code_fingerprint() -> str:
    digest = hashlib.sha256()
    for name in _CODE:
        digest.update(name.encode() + b"\0" + (PACKAGE / name).read_bytes())
    return digest.hexdigest()


def _store() -> Store:
    return _store_at(cache_root())  # follows $XDG_CACHE_HOME, as the load cache does


@functools.cache
def _store_at(root: Path) -> Store:
    return Store(root)  # one per process and folder: a forked render worker keeps its parent's


def flowchart(rb: Runbook, lang: str, anchor: Callable[[str], str],
              runbook_href: Callable[[str, str], str]) -> str:
    """`flowchart_svg(rb, lang, anchor, runbook_href)`, from the cache when it was drawn before."""
    inputs = _flowchart_inputs(rb, lang, anchor, runbook_href)
    key = key_of(KIND, "flowchart", code_fingerprint(), lang, inputs)
    svg = _store().read(KIND, key)
    if isinstance(svg, str):
        return svg
    svg = flowchart_svg(rb, lang, anchor=anchor, runbook_href=runbook_href)
    _store().write(KIND, key, svg)
    return svg


def _flowchart_inputs(rb: Runbook, lang: str, anchor: Callable[[str], str],
                      runbook_href: Callable[[str, str], str]) -> str:
    """Everything of `rb` the chart draws, in this language, and every link it draws, as text."""
    steps = [(sid, step.id, step.title.get(lang), step.default,
              [(b.goto, b.when, b.note.get(lang) if b.note else "") for b in step.branches])
             for sid, step in rb.steps.items()]
    ends = [(cid, end.id, end.title.get(lang), end.severity) for cid, end in rb.conclusions.items()]
    gotos = [[*(b.goto for b in step.branches), step.default] for step in rb.steps.values()]
    targets = sorted({target for step_gotos in gotos for target in step_gotos if target})
    links = [(t, runbook_href(*t.split(":", 1)) if ":" in t else "#" + anchor(t)) for t in targets]
    links += [(node, "#" + anchor(node)) for node in [*rb.steps, *rb.conclusions]]
    return repr((rb.id, rb.start, rb.title.get(lang), steps, ends, links))


def article(page_path: str, source: str, render: Callable[[str], Rendered]) -> Rendered:
    """`render(source)` for the article page at `page_path`, from the cache when it was rendered before."""
    key = key_of(KIND, "article", code_fingerprint(), page_path, source)
    plain = _store().read(KIND, key)
    restored = _restore(plain)
    if restored is not None:
        return restored
    rendered = render(source)
    _store().write(KIND, key, (rendered.html, [(h.level, h.text, h.anchor) for h in rendered.headings],
                               list(rendered.links)))
    return rendered


def _restore(plain: Any) -> Rendered | None:
    try:
        html, headings, links = plain
        return Rendered(html, [Heading(level, text, anchor) for level, text, anchor in headings], list(links))
    except (TypeError, ValueError):  # nothing stored, or not what this code writes
        return None

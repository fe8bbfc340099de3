"""`runbook search`: runbooks and knowledge-base articles, in English and Chinese.

Every item is indexed three times: its English text, its Chinese text, and what is
the same in both (id, tags, signatures). A query scores against all three, so a
Chinese query finds an item through its Chinese text even where the words it matched
are English-only elsewhere. Titles and symptoms weigh more than bodies.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from runbook.format.model import LANGS, Runbook
from runbook.library.kb import Article, KnowledgeBase
from runbook.library.runbooks import Library
from runbook.library.textindex import Index, query_terms, terms

SCHEMA = "runbook-search/v1"
SNIPPET_MAX = 160
_HEADING = re.compile(r"#{1,6}[ \t]+(.+?)[ \t#]*$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"^[\s#>*\-+|]+|[*`|]+|\s*\|\s*$")
WEIGHTS = {"id": 4.0, "title": 3.0, "tag": 3.0, "symptom": 2.5, "heading": 2.0, "summary": 1.5,
           "conclusion": 1.5, "signature": 1.0, "body": 1.0, "fix": 0.7, "explanation": 0.7}


@dataclass
class Item:
    """A runbook or an article as search sees it: weighted fields and snippet lines per language."""

    kind: str  # runbook | kb
    id: str
    titles: dict[str, str]
    fields: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # en, zh, any: (field, text)
    lines: dict[str, list[str]] = field(default_factory=dict)  # en, zh: snippet candidates
    paths: dict[str, str] = field(default_factory=dict)  # the file, per language


@dataclass
class Result:
    """One search hit."""

    kind: str
    id: str
    title: str
    score: float
    snippet: str
    snippet_lang: str
    path: str

    @property
    def command(self) -> str | None:
        return f"runbook run {self.id}" if self.kind == "runbook" else None

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "id": self.id, "title": self.title, "score": round(self.score, 2),
               "snippet": self.snippet, "snippet_lang": self.snippet_lang, "path": self.path}
        return out | ({"command": self.command} if self.command else {})


def runbook_item(runbook: Runbook) -> Item:
    """The searchable text of a runbook."""
    item = Item("runbook", runbook.id, {lang: runbook.title.get(lang) for lang in LANGS},
                paths={lang: runbook.path for lang in LANGS})
    for lang in LANGS:
        texts = [(runbook.title.get(lang), "title"), (runbook.summary.get(lang), "summary")]
        texts += [(s.get(lang), "symptom") for s in runbook.symptoms]
        for conclusion in runbook.conclusions.values():
            texts.append((conclusion.title.get(lang), "conclusion"))
            texts.append((conclusion.explanation.get(lang), "explanation"))
            texts += [(fix.title.get(lang), "fix") for fix in conclusion.fixes]
        item.fields[lang] = [(kind, text) for text, kind in texts]
        item.lines[lang] = [line for text, _ in texts for line in _lines(text)]
    item.fields["any"] = ([("id", runbook.id)] + [("tag", t) for t in runbook.tags]
                          + [("signature", s.pattern) for s in runbook.signatures])
    return item


def article_item(slug: str, versions: dict[str, Article]) -> Item:
    """The searchable text of a knowledge-base article (both languages)."""
    item = Item("kb", slug, {lang: a.title for lang, a in versions.items()},
                paths={lang: a.path for lang, a in versions.items()})
    any_version = next(iter(versions.values()))
    for lang in LANGS:
        article = versions.get(lang)
        if article is None:
            item.fields[lang], item.lines[lang] = [], []
            continue
        texts = [(article.title, "title"), (article.summary, "summary")]
        texts += [(h, "heading") for h in _headings(article.body)] + [(article.body, "body")]
        item.fields[lang] = [(kind, text) for text, kind in texts]
        item.lines[lang] = [line for text, _ in texts for line in _lines(text)]
    item.fields["any"] = [("id", slug)] + [("tag", t) for t in any_version.tags]
    return item


def _headings(markdown: str) -> list[str]:
    """Markdown headings, in order (code blocks left out)."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            found.append(m.group(1))
    return found


def _relative(path: str) -> str:
    """`path` relative to the working directory when it lies below it."""
    try:
        return os.path.relpath(path) if os.path.abspath(path).startswith(os.getcwd() + os.sep) else path
    except ValueError:  # another drive (Windows)
        return path


def _lines(text: str) -> list[str]:
    """Lines of `text` worth showing as a snippet, without Markdown markup."""
    out = []
    for raw in text.splitlines():
        line = _MARKUP.sub("", _LINK.sub(r"\1", raw)).strip()
        if line and not line.startswith("```") and set(line) - set("-:| "):
            out.append(line)
    return out


Counted = dict[str, dict[str, dict[str, int]]]  # index part -> field name -> term -> count


class SearchIndex:
    """Every item, indexed once per language and once for what both languages share."""

    def __init__(self, items: list[Item], counted: list[Counted] | None = None) -> None:
        """`counted`: the terms of the first items' fields, already counted (`_runbook_part`)."""
        self.items = items
        self.indexes = {part: Index(WEIGHTS) for part in (*LANGS, "any")}
        counted = counted or []
        for i, item in enumerate(items):
            for part, index in self.indexes.items():
                if i < len(counted):
                    _add_counted(index, counted[i].get(part, {}))
                else:
                    index.add(item.fields.get(part, []))

    def search(self, query: str, lang: str = "en", top: int = 10) -> list[Result]:
        """The `top` best items for `query`, titles in `lang`."""
        weights = query_terms(query)
        totals = [0.0] * len(self.items)
        for index in self.indexes.values():
            for i, score in enumerate(index.scores(weights)):
                totals[i] += score
        # a query that is an item's whole title (in either language) finds that item first
        wanted = query.strip().casefold()
        titled = {i for i, item in enumerate(self.items)
                  if any((t or "").strip().casefold() == wanted for t in item.titles.values())}
        ranked = sorted((i for i, s in enumerate(totals) if s > 0),
                        key=lambda i: (i not in titled, -totals[i], i))
        return [self._result(self.items[i], totals[i], weights, lang) for i in ranked[:top]]

    def _result(self, item: Item, score: float, weights: dict[str, float], lang: str) -> Result:
        snippet, snippet_lang = self._snippet(item, weights, lang)
        title = item.titles.get(lang) or next(iter(item.titles.values()), item.id)
        path = item.paths.get(lang) or next(iter(item.paths.values()), "")
        return Result(item.kind, item.id, title, score, snippet, snippet_lang, _relative(path))

    def _snippet(self, item: Item, weights: dict[str, float], lang: str) -> tuple[str, str]:
        """The line of the item that holds the most (and rarest) query terms.

        Lines in the query's language are preferred (Chinese when it has Chinese
        characters), then lines in `lang`.
        """
        first = "zh" if any(_is_cjk(ch) for term in weights for ch in term) else "en"
        order = sorted(LANGS, key=lambda lng: (lng != first, lng != lang))
        for candidate_lang in order:
            index = self.indexes[candidate_lang]
            best: tuple[float, int] = (0.0, 0)
            line = ""
            for candidate in item.lines.get(candidate_lang, []):
                present = set(terms(candidate)) & weights.keys()
                value = sum(weights[t] * max(index.idf(t), 0.1) for t in present)
                key = (round(value, 6), -len(candidate))
                if value and key > best:
                    best, line = key, candidate
            if line:
                return _window(line, weights), candidate_lang
        return "", lang


def _add_counted(index: Index, doc: dict[str, dict[str, int]]) -> None:
    """`Index.add` of a document whose fields' terms are already counted."""
    lengths = {name: sum(counts.values()) for name, counts in doc.items()}
    index.docs.append({name: Counter(counts) for name, counts in doc.items()})
    index.lengths.append(lengths)
    index.totals.update(lengths)
    index.df.update({term for counts in doc.values() for term in counts})


def _is_cjk(ch: str) -> bool:
    return "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def _window(line: str, weights: dict[str, float]) -> str:
    """`line`, or the part of it around the first query term when it is long."""
    if len(line) <= SNIPPET_MAX:
        return line
    lowered = line.lower()
    positions = [p for t in weights if (p := lowered.find(t)) >= 0]
    start = max(0, min(positions, default=0) - 40)
    piece = line[start:start + SNIPPET_MAX]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_MAX < len(line) else "")


def build_index(library: Library, kb: KnowledgeBase) -> SearchIndex:
    """An index of every runbook in `library` and every article in `kb`. The runbooks' part
    (their items with every field's terms counted) is derived once per library content and kept
    in the load cache, so a search reads it instead of loading every runbook."""
    part = library.derived("search-runbook-items", lambda: _runbook_part(library), _is_part)
    items = [Item(kind, rid, titles, {}, lines, paths) for kind, rid, titles, lines, paths, _ in part]
    items += [article_item(slug, versions) for slug, versions in sorted(kb.articles.items())]
    return SearchIndex(items, [counted for *_, counted in part])


RunbookPart = list[tuple[str, str, dict[str, str], dict[str, list[str]], dict[str, str], Counted]]


def _runbook_part(library: Library) -> RunbookPart:
    """(kind, id, titles, lines, paths, counted fields per index part) of every runbook: plain data."""
    out: RunbookPart = []
    for runbook in sorted(library.runbooks(), key=lambda r: r.id):
        item = runbook_item(runbook)
        counted = {part: {name: dict(counts) for name, counts in _counted(item.fields.get(part, [])).items()}
                   for part in (*LANGS, "any")}
        out.append((item.kind, item.id, item.titles, item.lines, item.paths, counted))
    return out


def _counted(fields: list[tuple[str, str]]) -> dict[str, Counter[str]]:
    """What `Index.add` counts of a document: the terms of each field."""
    doc: dict[str, Counter[str]] = {}
    for name, text in fields:
        doc.setdefault(name, Counter()).update(terms(text))
    return doc


def _is_part(value: Any) -> bool:
    """Whether a value kept in the load cache is what `_runbook_part` returns."""
    try:
        return isinstance(value, list) and all(
            len(entry) == 6 and all(isinstance(x, dict) for x in (entry[2], entry[3], entry[4], entry[5]))
            for entry in value)
    except TypeError:
        return False


def search(query: str, library: Library, kb: KnowledgeBase, lang: str = "en",
           top: int = 10) -> list[Result]:
    """Runbooks and articles matching `query`, best first."""
    return build_index(library, kb).search(query, lang, top)

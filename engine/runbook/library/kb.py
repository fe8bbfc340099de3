"""The knowledge base: `kb/<slug>/en.md` and `zh.md`, each with YAML front matter.

Front matter: id, lang, title, summary (required), tags, taxonomy, runbooks, seed.
Search path, like runbooks': each directory in $RUNBOOK_KB_PATH (os.pathsep-separated),
then `./kb`, then the built-in articles (the clone's `kb/` or a wheel's copy: library/shipped.py); the
first article found with an id wins. `check_links` checks links in both directions:
articles to runbooks, kb articles and taxonomy ids; runbooks' `see_also: [kb:...]` to
articles; and that a runbook an article names links back to it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from runbook.format import safeyaml
from runbook.format.model import LANGS, Runbook
from runbook.format.problems import Problem, did_you_mean
from runbook.format.suggest import Suggestions
from runbook.format.todo import MARKER
from runbook.format.todo import MESSAGE as TODO_MESSAGE
from runbook.library.shipped import shipped_dir

if TYPE_CHECKING:
    from runbook.format.yamlpos import Positions

REQUIRED = ("id", "lang", "title", "summary")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_LINK = re.compile(r"\]\((kb|runbook):([^)#\s]+)(?:#[^)\s]*)?\)")


@dataclass
class Article:
    """One language version of a knowledge-base article."""

    slug: str
    lang: str
    title: str
    summary: str
    tags: list[str]
    taxonomy: list[str]
    runbooks: list[str]
    meta: dict[str, Any]
    body: str
    path: str
    body_line: int = 1  # line of the file where the body starts


@dataclass
class KnowledgeBase:
    """Every article by slug and language, and the problems found reading them."""

    articles: dict[str, dict[str, Article]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def article(self, slug: str, lang: str) -> Article | None:
        return self.articles.get(slug, {}).get(lang)


def kb_dirs() -> list[Path]:
    """Directories that hold knowledge-base articles, in search order."""
    dirs = [Path(p) for p in os.environ.get("RUNBOOK_KB_PATH", "").split(os.pathsep) if p]
    dirs.append(Path.cwd() / "kb")
    dirs.append(shipped_dir("kb"))
    unique: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


def load_kb(dirs: Iterable[Path] | None = None) -> KnowledgeBase:
    """Read every article folder under `dirs` (default: the kb search path)."""
    kb = KnowledgeBase()
    for directory in kb_dirs() if dirs is None else dirs:
        for folder in sorted(p for p in Path(directory).iterdir() if p.is_dir()):
            if folder.name in kb.articles:
                continue
            versions = {}
            for lang in LANGS:
                path = folder / f"{lang}.md"
                if path.exists():
                    article = _read(path, folder.name, lang, kb.problems)
                    if article is not None:
                        versions[lang] = article
            if not versions:
                continue
            for lang in LANGS:
                if not (folder / f"{lang}.md").exists():
                    present = next(iter(versions.values())).path
                    kb.problems.append(Problem(present, 1, 1, (), f"article {folder.name!r} has no "
                                               f"{lang}.md (every article exists in English and Chinese)"))
            kb.articles[folder.name] = versions
    return kb


def _read(path: Path, slug: str, lang: str, problems: list[Problem]) -> Article | None:
    def problem(message: str, line: int = 1) -> None:
        problems.append(Problem(str(path), line, 1, (), message))

    try:
        text, _ = safeyaml.read_text(path, safeyaml.ARTICLE_MAX_BYTES)
    except OSError as exc:
        problem(f"cannot read file: {exc.strerror or exc}")
        return None
    except safeyaml.LimitError as exc:
        problem(exc.message, exc.line)
        return None
    problems.extend(todo_markers(str(path), text))
    found = _FRONT_MATTER.match(text)
    if not found:
        problem("no front matter (the file must start with a `---` block)")
        return None
    try:
        meta = safeyaml.load(found.group(1))
    except yaml.YAMLError as exc:  # LimitError among them: an alias bomb, deep nesting
        mark = getattr(exc, "problem_mark", None)
        problem(f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}",
                (mark.line + 2) if mark else 1)
        return None
    if not isinstance(meta, dict):
        problem("front matter must be a mapping")
        return None
    missing = [key for key in REQUIRED if not meta.get(key)]
    if missing:
        problem(f"front matter lacks {', '.join(missing)}")
    if meta.get("id") and meta["id"] != slug:
        problem(f"id {meta['id']!r} differs from the folder name {slug!r}")
    if meta.get("lang") and meta["lang"] != lang:
        problem(f"lang {meta['lang']!r} differs from the file name {lang}.md")
    return Article(slug, lang, str(meta.get("title") or ""), str(meta.get("summary") or ""),
                   _strings(meta.get("tags")), _strings(meta.get("taxonomy")),
                   _strings(meta.get("runbooks")), meta, text[found.end():], str(path),
                   text[:found.end()].count("\n") + 1)


def todo_markers(file: str, text: str) -> list[Problem]:
    """Lines of an article still holding `runbook new`'s marker (front matter fields by key)."""
    front = _FRONT_MATTER.match(text)
    front_lines = front.group(0).count("\n") if front else 0
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        column = line.find(MARKER)
        if column < 0:
            continue
        key = line.split(":", 1)[0].strip() if number <= front_lines and ":" in line else ""
        found.append(Problem(file, number, column + 1, (key,) if key else (), TODO_MESSAGE))
    return found


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def front_matter_meta(block: str) -> dict[str, Any]:
    """The mapping in a front matter block (as split_front_matter gives it); {} when broken
    (reading the article reports why)."""
    found = _FRONT_MATTER.match(block)
    try:
        meta = safeyaml.load(found.group(1)) if found else None
    except yaml.YAMLError:
        return {}
    return meta if isinstance(meta, dict) else {}


def split_front_matter(text: str) -> tuple[str, str] | None:
    """(front matter block with its `---` lines, body) of an article's text, or None without one."""
    found = _FRONT_MATTER.match(text)
    return (text[:found.end()], text[found.end():]) if found else None


def check_links(kb: KnowledgeBase, runbooks: Mapping[str, Runbook]) -> list[Problem]:
    """Broken or one-way links between articles, runbooks and the taxonomy."""
    problems: list[Problem] = []
    for slug, versions in kb.articles.items():
        for article in versions.values():
            problems.extend(_article_links(article, kb, runbooks))
        first = versions.get("en") or next(iter(versions.values()))
        for rid in first.runbooks:
            runbook = runbooks.get(rid)
            if runbook is not None and not _links_back(runbook, slug):
                problems.append(Problem(first.path, 1, 1, ("runbooks",),
                                        f"runbook {rid!r} does not link back (add kb:{slug} to a "
                                        f"conclusion's see_also)", "warning"))
    articles = Suggestions(kb.articles)  # one index for every "did you mean" (a renamed article)
    for runbook in runbooks.values():
        problems.extend(_runbook_kb_links(runbook, kb, articles))
    return problems


def _article_links(article: Article, kb: KnowledgeBase,
                   runbooks: Mapping[str, Runbook]) -> list[Problem]:
    from runbook.format import taxonomy

    problems: list[Problem] = []
    for rid in article.runbooks:
        if rid not in runbooks:
            problems.append(Problem(article.path, 1, 1, ("runbooks",), f"no runbook named {rid!r}"))
    known = taxonomy.load()
    for tid in article.taxonomy:
        if tid not in known:
            problems.append(Problem(article.path, 1, 1, ("taxonomy",),
                                    f"unknown taxonomy id {tid!r}{did_you_mean(tid, known)}"))
    for number, line in enumerate(article.body.splitlines(), article.body_line):
        for kind, name in _LINK.findall(line):
            exists = name in kb.articles if kind == "kb" else name in runbooks
            if not exists:
                what = "article" if kind == "kb" else "runbook"
                problems.append(Problem(article.path, number, 1, (),
                                        f"link to {kind}:{name}: no such {what}"))
    return problems


def _links_back(runbook: Runbook, slug: str) -> bool:
    return any(link.split("#")[0] == f"kb:{slug}"
               for conclusion in runbook.conclusions.values() for link in conclusion.see_also)


def _runbook_kb_links(runbook: Runbook, kb: KnowledgeBase, articles: Suggestions) -> list[Problem]:
    problems: list[Problem] = []
    positions: list[Positions | None] = []  # the file parsed once, for its first broken link
    for cid, conclusion in runbook.conclusions.items():
        for i, link in enumerate(conclusion.see_also):
            kind, _, name = link.partition(":")
            name = name.split("#")[0]
            if kind == "kb" and name not in kb.articles:
                if not positions:
                    positions.append(_positions(runbook.path))
                where = ("conclusions", cid, "see_also", i)
                line, column = positions[0].of(where) if positions[0] is not None else (1, 1)
                problems.append(Problem(runbook.path, line, column, where,
                                        f"no kb article named {name!r}{articles.hint(name)}"))
    return problems


def _positions(path: str) -> Positions | None:
    from runbook.format.yamlpos import parse

    try:
        return parse(safeyaml.read_text(path)[0])[1]
    except Exception:  # the loader already reported what is wrong with the file
        return None

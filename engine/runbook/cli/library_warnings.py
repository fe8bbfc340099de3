"""One broken file never takes a command down: the command names it once and goes on.

`list`, `show`, `run`, `triage` and `search` use the runbooks and articles that loaded; a file
that did not load (a syntax error, an alias bomb, a file too large, a duplicate id) is named
on stderr with its first problem, once per command. `runbook lint` still fails on it.
"""

from __future__ import annotations

import sys
from typing import TextIO

from runbook.library.kb import KnowledgeBase
from runbook.library.runbooks import Library

_warned: set[str] = set()  # files already named in this process


def warn_unloaded(library: Library, out: TextIO | None = None) -> None:
    """Name each runbook file on the search path that is not in the library."""
    for file, problems in library.unloaded():  # broken, or a duplicate id (the later file)
        _warn(file, [str(p) for p in problems], out)


def warn_unloaded_articles(kb: KnowledgeBase, out: TextIO | None = None) -> None:
    """Name each article file that did not load (the others are searched and linked)."""
    loaded = {article.path for versions in kb.articles.values() for article in versions.values()}
    by_file: dict[str, list[str]] = {}
    for problem in kb.problems:
        if problem.severity == "error" and problem.file not in loaded:
            by_file.setdefault(problem.file, []).append(str(problem))
    for file, problems in by_file.items():
        _warn(file, problems, out)


def _warn(file: str, problems: list[str], out: TextIO | None) -> None:
    if file in _warned:
        return
    _warned.add(file)
    more = f" and {len(problems) - 1} more problem(s)" if len(problems) > 1 else ""
    print(f"runbook: warning: {problems[0]} (file skipped{more}; the rest goes on; "
          f"`runbook lint {file}` shows every problem)", file=out or sys.stderr)

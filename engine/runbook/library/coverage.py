"""Library-wide coverage: every taxonomy id is reached by a conclusion and explained by an article.

Only meaningful for the whole library (runbooks and knowledge base together), so
`runbook lint` runs it when it lints the library, not single files.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources

from runbook.format import taxonomy
from runbook.format.model import Runbook
from runbook.format.problems import Problem
from runbook.library.kb import KnowledgeBase


def taxonomy_coverage(runbooks: Iterable[Runbook], kb: KnowledgeBase) -> list[Problem]:
    """An error per id no conclusion names; a warning per id no article names."""
    concluded = {tid for rb in runbooks for c in rb.conclusions.values() for tid in c.taxonomy}
    explained = {tid for langs in kb.articles.values() for article in langs.values()
                 for tid in article.taxonomy}
    source = resources.files("runbook").joinpath("data/taxonomy.yaml")
    lines = source.read_text("utf-8").splitlines()
    problems = []
    for tid in taxonomy.load():
        line = next((n for n, text in enumerate(lines, 1) if text.strip() == f"{tid}:"), 1)
        column = lines[line - 1].index(tid) + 1 if lines else 1
        if tid not in concluded:
            problems.append(Problem(str(source), line, column, (tid,),
                                    f"no runbook conclusion has taxonomy id {tid!r} "
                                    f"(add a conclusion with `taxonomy: [{tid}]`)"))
        if tid not in explained:
            problems.append(Problem(str(source), line, column, (tid,),
                                    f"no knowledge-base article covers {tid!r} "
                                    f"(add `taxonomy: [{tid}]` to an article's front matter)",
                                    "warning"))
    return problems

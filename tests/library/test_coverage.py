"""Library-wide taxonomy coverage, as `runbook lint` reports it."""

from __future__ import annotations

from runbook.format import taxonomy
from runbook.library.coverage import taxonomy_coverage
from runbook.library.kb import KnowledgeBase, kb_dirs, load_kb
from runbook.library.runbooks import load_library, search_path


def test_every_taxonomy_id_has_a_conclusion_and_an_article() -> None:
    library = load_library(search_path())
    problems = taxonomy_coverage(library.runbooks(), load_kb(kb_dirs()))
    assert [str(p) for p in problems] == []


def test_an_empty_library_misses_every_id() -> None:
    problems = taxonomy_coverage([], KnowledgeBase())
    ids = list(taxonomy.load())
    assert [p.path[0] for p in problems if p.severity == "error"] == ids
    assert [p.path[0] for p in problems if p.severity == "warning"] == ids
    first = next(p for p in problems if p.path == ("hang.dataloader",))
    assert first.line > 1 and "taxonomy: [hang.dataloader]" in first.message

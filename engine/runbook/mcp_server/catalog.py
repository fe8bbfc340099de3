"""The library as an assistant reads it: list_runbooks, show_runbook, search. The same engine
functions `runbook list`, `show` and `search` call (library/, versions/pins.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from runbook.library.kb import load_kb
from runbook.library.lazy import open_library
from runbook.library.outline import runbook_outline
from runbook.library.runbooks import Library, load_library, runbook_rows
from runbook.library.search import SCHEMA as SEARCH_SCHEMA
from runbook.library.search import search as search_library
from runbook.mcp_server.answer import Answer, ToolInputError, check_range
from runbook.versions.pins import RunbookNotFound, resolve_runbook

MAX_TOP = 50


def list_runbooks(lang: str) -> Answer:
    library = load_library()
    rows = runbook_rows(library, lang)
    lines = [f"{r['id']} {r['version']}: {r['title']}" for r in rows]
    return Answer({"runbooks": rows, "unloaded": unloaded_files(library)}, "\n".join(lines))


def unloaded_files(library: Library) -> list[dict[str, str]]:
    """The runbook files that did not load, each with its first problem (`runbook lint` has all)."""
    return [{"file": file, "problem": str(problems[0])} for file, problems in library.unloaded() if problems]


def show_runbook(name: str, lang: str) -> Answer:
    runbook = find_runbook(name, open_library())
    return Answer(dataclasses.asdict(runbook), runbook_outline(runbook, lang))


def find_runbook(name: str, library: Library) -> Any:
    """The runbook `name` (ID, ID@VERSION, ID@sha256:PREFIX) names; ToolInputError saying why not."""
    try:
        return resolve_runbook(name, library)
    except RunbookNotFound as exc:
        raise ToolInputError(f"runbook: {exc.one_line()}") from None


def search(query: str, top: int, lang: str) -> Answer:
    if not query.strip():
        raise ToolInputError("query: empty; give words in English or Chinese, e.g. 'NCCL timeout' "
                             "or 显存不足")
    check_range("top", top, 1, MAX_TOP)
    results = search_library(query, open_library(), load_kb(), lang, top)
    lines = [f"{rank}. [{r.kind}] {r.id}: {r.title}" + (f" ({r.snippet})" if r.snippet != r.title else "")
             for rank, r in enumerate(results, 1)]
    text = "\n".join(lines) or (f"没有与 “{query}” 匹配的 runbook 或文章" if lang == "zh"
                                else f"no runbook or article matches '{query}'")
    return Answer({"schema": SEARCH_SCHEMA, "query": query, "results": [r.to_json() for r in results]}, text)

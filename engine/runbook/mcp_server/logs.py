"""triage_log: what a pasted log, or a log file or folder on the server's machine, shows, causes
first; the same reading and ranking as `runbook triage` (triage/result.py)."""

from __future__ import annotations

import os
from typing import Any

from runbook.library.kb import load_kb
from runbook.library.lazy import open_library
from runbook.mcp_server.answer import Answer, ToolInputError, check_range
from runbook.run.redact import Redactor
from runbook.triage.logstream import LogSourceError
from runbook.triage.result import TriageResult, triage_sources, triage_text
from runbook.triage.sources import SourceError, expand_inputs
from runbook.triage.verdict import ROLE_WORDS

MAX_TOP = 50


def triage_log(text: str | None, path: str | None, top: int, lang: str) -> Answer:
    if (text is None) == (path is None):
        neither_or_both = "both" if text is not None else "neither"
        raise ToolInputError("give either text (the log, pasted) or path (a log file or folder on the "
                             f"machine the server runs on), not {neither_or_both}")
    check_range("top", top, 1, MAX_TOP)
    result = _read(text, path)
    result.matches = result.matches[:top]
    # Matched lines quote the log: hidden as a report's evidence is (run/redact.py).
    doc = Redactor().data(result.to_json(lang))
    return Answer(doc, Redactor().text(_text(doc, lang)))


def _read(text: str | None, path: str | None) -> TriageResult:
    library, kb = open_library(), load_kb()
    if text is not None:
        if not text.strip():
            raise ToolInputError("text: empty; paste the log's lines (the error and what came before it)")
        return triage_text(library, kb, text)
    assert path is not None
    if path.strip() in ("", "-"):
        raise ToolInputError("path: name a log file or folder (stdin is the server's own channel)")
    try:
        return triage_sources(library, kb, expand_inputs([os.path.expanduser(path)]))
    except (SourceError, LogSourceError) as exc:
        raise ToolInputError(f"path: {exc}") from None


def _text(doc: dict[str, Any], lang: str) -> str:
    """The verdict in a sentence, then one line per match: what, where, and which runbook to run."""
    lines = [doc["summary"]]
    for rank, match in enumerate(doc["matches"], 1):
        name = f"{match['runbook']}:{match['conclusion']['id']}" if match["runbook"] \
            else f"kb:{match['conclusion']['id']}"
        confidence = f"{'置信度' if lang == 'zh' else 'confidence'} {match['confidence']:.2f}"
        lines.append(f"{rank}. [{ROLE_WORDS[lang][match['role']]}] {match['conclusion']['title']} ({name}, "
                     f"{confidence}): {match['why']}")
        if match["runbook"]:
            lines.append(f"   → run_runbook {match['runbook']}")
    return "\n".join(lines)

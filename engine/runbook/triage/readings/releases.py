"""A release's confirmed bug, read from the log alone: the NCCL version the log states, and the
bug's own lines.

The `known_issues` check matches the node's NCCL against a table of releases whose bugs their
maintainers confirmed (checks/distributed/known_regressions.json); its `error` rows each name the
affected releases and the lines that show the bug. A pasted log often states the version too: in
NCCL's banner (`NCCL version 2.18.1+cuda12.1`), in torch's error suffix (`..., NCCL version
2.25.1`) or vLLM's `nccl==2.18.1`. Where such a version is affected by a row and the excerpt holds
all of the row's lines, the matches whose own lines show the bug are moved to `CONCLUSION`
(verdict.py's refine): `Cuda failure 'invalid argument'` is NCCL 2.18's P2P bug under 2.18.1
and an unexplained NCCL error under 2.21. A version alone is never a failure.

The rules are data (the table, `VERSIONS`), shared with the site's page (site/triage_export.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from runbook.checks.distributed import _regressions

CONCLUSION = "nccl-errors:nccl-release-bug"
KIND = "error"  # the table's rows that name a failure of their own (not the watchdog's or abort's)
COMPONENT = "nccl"  # whose version a log states
# group 1 is the version; `needle`: lowercase text a line holds first
VERSIONS = [
    {"pattern": r"NCCL version (\d+\.\d+\.\d+)", "needle": "nccl version"},
    {"pattern": r"\bnccl==(\d+\.\d+\.\d+)", "needle": "nccl=="},
]
_VERSIONS = [(spec["needle"], re.compile(spec["pattern"])) for spec in VERSIONS]
NEEDLES = tuple(spec["needle"] for spec in VERSIONS)


@cache
def rows() -> tuple[dict[str, Any], ...]:
    """The table's error rows of the component a log states the version of."""
    return tuple(row for row in _regressions.load() if row["kind"] == KIND and row["component"] == COMPONENT)


class Releases:
    """The versions a log states, in the order first met."""

    def __init__(self) -> None:
        self.versions: dict[str, None] = {}

    def block(self, lines: list[str], lowered: str) -> None:
        """Read a block of normalised lines (`lowered`: its text, lowercased)."""
        if not any(needle in lowered for needle in NEEDLES):
            return
        for line in lines:
            low = line.lower()
            for needle, regex in _VERSIONS:
                if needle in low:
                    for found in regex.finditer(line):
                        self.versions.setdefault(found.group(1), None)

    def bugs(self, lines: Iterable[str]) -> list[dict[str, Any]]:
        """The rows a stated version is affected by and whose lines `lines` all hold (the excerpt's
        last lines, its error lines and its matched lines), each with the version and lines."""
        if not self.versions:
            return []
        return _regressions.match(list(rows()), {COMPONENT: list(self.versions)}, list(lines))


def shows(bug: dict[str, Any], texts: Iterable[str]) -> bool:
    """Whether some of `texts` (a match's lines) is one of the bug's own lines."""
    patterns = [re.compile(p) for p in _log_all(bug["id"])]
    return any(p.search(text) for text in texts for p in patterns)


def _log_all(row_id: str) -> list[str]:
    return next((row.get("log_all", []) for row in rows() if row["id"] == row_id), [])


def describe(bug: dict[str, Any], lang: str = "en") -> str:
    """One clause: the release, its bug and where it is fixed."""
    fixed, source = bug.get("fixed_in"), bug["sources"][0]
    if lang == "zh":
        return f"NCCL {bug['version']} 有已确认的缺陷：{bug['title'][lang]}" + (
            f"（{fixed} 修复）" if fixed else "") + f"，{source}"
    return f"NCCL {bug['version']} has a confirmed bug: {bug['title'][lang]}" + (
        f" (fixed in {fixed})" if fixed else "") + f", {source}"

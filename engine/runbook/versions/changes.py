"""What changed in a linted file: stale translations, and versioning against a base revision.

Both compare a file with an earlier state of itself: its translation
fingerprints, and (with `runbook lint --base REV`) the same file at REV.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from runbook.format.loader import LoadResult
from runbook.format.problems import DocPath, Problem
from runbook.format.yamlpos import DuplicateKeyError, Positions, parse
from runbook.i18n.translations import runbook_problems
from runbook.versions.gitrev import Revision
from runbook.versions.rules import check_version


def runbook_changes(results: Iterable[LoadResult], revision: Revision | None) -> list[Problem]:
    """Problems of each loaded runbook file against its fingerprints and, given a revision,
    against the same file there.

    Raises GitRevError when the revision cannot be read at all."""
    problems: list[Problem] = []
    for result in results:
        data, positions = result.data, result.positions
        if not isinstance(data, dict) or positions is None:
            continue  # the loader reports why the file does not parse
        file = Path(result.path)
        old = _old_document(file, revision) if revision is not None else None
        problems += runbook_problems(result.path, data, positions, old)
        if revision is not None:
            problems += _version_problems(result.path, data, positions, old, revision.rev)
    return problems


def _version_problems(file: str, data: dict[str, Any], positions: Positions,
                      old: dict[str, Any] | None, rev: str) -> list[Problem]:
    found: list[Problem] = []

    def report(path: DocPath, message: str) -> None:
        found.append(Problem(file, *positions.of(path), path, message))

    check_version(old, data, rev, report)
    return found


def _old_document(file: Path, revision: Revision) -> dict[str, Any] | None:
    """The file's document at the revision; None when it was not there (or was not a runbook)."""
    text = revision.read(file)
    parsed = _parse(text) if text is not None else None
    return parsed[0] if parsed is not None and isinstance(parsed[0], dict) else None


def _parse(text: str | None) -> tuple[Any, Positions] | None:
    if text is None:
        return None
    try:
        return parse(text)
    except (yaml.YAMLError, DuplicateKeyError):  # the loader reports them for today's file
        return None

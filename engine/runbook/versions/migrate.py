"""Upgrade a runbook file written for an older apiVersion to the one this engine reads.

MIGRATIONS maps an apiVersion to the next one and the function that rewrites a
document one step forward; they are chained until the format's current API_VERSION, so a
future `runbook/v1 -> runbook/v2` is one more entry. Documents are edited with
ruamel.yaml's round-trip mode, which keeps comments, key order and quoting.

ruamel.yaml is imported only when a file is migrated. The loader does not import this
module: it knows the older apiVersions from `format.engine_version.API_VERSIONS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runbook.format import roundtrip
from runbook.format.engine_version import API_VERSION, unsupported_api_version
from runbook.format.problems import DocPath, Problem
from runbook.versions import v1beta1

Upgrade = Callable[[Any], None]  # rewrites a ruamel CommentedMap in place

# apiVersion -> (the apiVersion it becomes, the function that rewrites it)
MIGRATIONS: dict[str, tuple[str, Upgrade]] = {
    "runbook/v1beta1": ("runbook/v1", v1beta1.upgrade),
}


class MigrateError(Exception):
    """A file that cannot be migrated; carries where, like a loader problem."""

    def __init__(self, line: int, column: int, path: DocPath, message: str) -> None:
        super().__init__(message)
        self.line, self.column, self.path, self.message = line, column, path, message

    def problem(self, file: str) -> Problem:
        return Problem(file, self.line, self.column, self.path, self.message)


@dataclass(frozen=True)
class Migrated:
    from_version: str
    to_version: str
    text: str  # the file's new text; the old text when nothing changed

    @property
    def changed(self) -> bool:
        return self.from_version != self.to_version


def migrate_text(text: str) -> Migrated:
    """The text of a runbook file upgraded to the current apiVersion. Raises MigrateError."""
    doc, yaml = _load(text)
    version = _api_version(doc, API_VERSION)
    if version == API_VERSION:
        return Migrated(version, version, text)
    current = version
    while current != API_VERSION:
        current, upgrade = MIGRATIONS[current]
        upgrade(doc)
        doc["apiVersion"] = current
    return Migrated(version, current, roundtrip.dump(yaml, doc))


def _api_version(doc: Any, current: str) -> str:
    version = doc.get("apiVersion")
    if version is None:
        raise MigrateError(1, 1, (), f"missing apiVersion (expected e.g. 'apiVersion: {current}')")
    if version != current and (not isinstance(version, str) or version not in MIGRATIONS):
        line, column = doc.lc.value("apiVersion")
        raise MigrateError(line + 1, column + 1, ("apiVersion",),
                           unsupported_api_version(version, current))
    return str(version)


def _load(text: str) -> tuple[Any, Any]:
    """(document, a writer keeping the file's layout). Raises MigrateError."""
    from ruamel.yaml.comments import CommentedMap

    try:
        doc, yaml, _ = roundtrip.load(text)
    except roundtrip.RoundTripError as exc:
        raise MigrateError(exc.line, exc.column, (), exc.message) from None
    if not isinstance(doc, CommentedMap):
        raise MigrateError(1, 1, (), "a runbook is a YAML mapping (apiVersion, id, steps, ...)")
    return doc, yaml

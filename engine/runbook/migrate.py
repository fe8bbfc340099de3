"""Upgrade a runbook file written for an older apiVersion to the one this engine reads.

MIGRATIONS maps an apiVersion to the next one and the function that rewrites a
document one step forward; they are chained until the loader's API_VERSION, so a
future `runbook/v1 -> runbook/v2` is one more entry. Documents are edited with
ruamel.yaml's round-trip mode, which keeps comments, key order and quoting.

ruamel.yaml is imported only when a file is migrated; the loader imports this
module for MIGRATIONS alone, and only for a file that is not current.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runbook import migrate_v1beta1
from runbook.problems import DocPath, Problem

Upgrade = Callable[[Any], None]  # rewrites a ruamel CommentedMap in place

# apiVersion -> (the apiVersion it becomes, the function that rewrites it)
MIGRATIONS: dict[str, tuple[str, Upgrade]] = {
    "runbook/v1beta1": ("runbook/v1", migrate_v1beta1.upgrade),
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
    from runbook.loader import API_VERSION

    yaml = _round_trip(text)
    doc = _load(yaml, text)
    version = _api_version(doc, API_VERSION)
    if version == API_VERSION:
        return Migrated(version, version, text)
    current = version
    while current != API_VERSION:
        current, upgrade = MIGRATIONS[current]
        upgrade(doc)
        doc["apiVersion"] = current
    out = io.StringIO()
    yaml.dump(doc, out)
    return Migrated(version, current, out.getvalue())


def _api_version(doc: Any, current: str) -> str:
    from runbook.engine_version import unsupported_api_version

    version = doc.get("apiVersion")
    if version is None:
        raise MigrateError(1, 1, (), f"missing apiVersion (expected e.g. 'apiVersion: {current}')")
    if version != current and (not isinstance(version, str) or version not in MIGRATIONS):
        line, column = doc.lc.value("apiVersion")
        raise MigrateError(line + 1, column + 1, ("apiVersion",),
                           unsupported_api_version(version, current))
    return str(version)


def _load(yaml: Any, text: str) -> Any:
    from ruamel.yaml import YAMLError
    from ruamel.yaml.comments import CommentedMap

    try:
        doc = yaml.load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise MigrateError(line, column, (), f"YAML syntax error: {problem}") from None
    if not isinstance(doc, CommentedMap):
        raise MigrateError(1, 1, (), "a runbook is a YAML mapping (apiVersion, id, steps, ...)")
    return doc


def _round_trip(text: str) -> Any:
    """A ruamel.yaml round-trip instance that writes the file back in its own layout."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 1 << 20  # never rewrap a long line
    mapping, offset = guess_indent(text)
    yaml.indent(mapping=mapping, sequence=max(mapping, offset + 2), offset=offset)
    # `key: null` stays `null` (ruamel would write an empty value).
    yaml.representer.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    return yaml




def guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, offset of a block sequence's dash) as the file uses them.

    Taken from the first nested mapping key and the first block sequence under a key;
    2 and 2 (`key:` / `  - item`, this repository's style) when the file shows none.
    """
    mapping = offset = None
    parent: int | None = None  # indentation of the previous `key:` line without a value
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        dash = stripped.startswith("- ")
        if parent is not None and (indent > parent or (dash and indent == parent)):
            if dash:
                offset = offset if offset is not None else indent - parent
            else:
                mapping = mapping if mapping is not None else indent - parent
        parent = indent if stripped.endswith(":") and not dash else None
        if mapping is not None and offset is not None:
            break
    return mapping or 2, offset if offset is not None else 2

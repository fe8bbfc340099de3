"""The table of releases with known bugs (`known_regressions.json`): loaded, validated, matched.

Each row is one bug a maintainer confirmed in its thread (`sources`): the component (`torch`
or `nccl`), the releases it affects (`affected`: specifiers such as "==2.25.1" or ">=2.3.0",
all of which must hold) and/or the log lines that show it (`log_all`: regexes that must all be
found), what fixes it (`fix`, and `fixed_in` when a release is named), the workaround for the
job (`workaround`; `env` for settings, `upgrade` for a pip requirement). A row matches a node
when the versions it names are affected and its log lines are all in the log; a row with only
`log_all` matches on the log alone (the thread confirms the behaviour, not a release range).

Standard library only: the table ships in the probe bundle and is read on the node. The file is
JSON (no YAML parser on a node); a bad row is one line, `known_regressions.json:LINE: what`.
"""

from __future__ import annotations

import json
import pkgutil
import re
from collections.abc import Iterable
from typing import Any

TABLE = "known_regressions.json"
COMPONENTS = ("torch", "nccl")
KINDS = ("watchdog", "abort-hang", "error")
_REQUIRED = ("id", "component", "kind", "title", "fix", "workaround", "sources")
_OPTIONAL = ("affected", "fixed_in", "log_all", "env", "upgrade")
_SPEC = re.compile(r"^(==|!=|>=|<=|>|<)(\d+(?:\.\d+){0,3})$")
_VERSION = re.compile(r"^(\d+(?:\.\d+){0,3})")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class TableError(ValueError):
    """A row of the table is malformed: `FILE:LINE: what`."""


def load(text: str | None = None, name: str = TABLE) -> list[dict[str, Any]]:
    """The validated rows of the table (the shipped one unless `text` is given)."""
    if text is None:
        data = pkgutil.get_data(__package__ or "runbook.checks.distributed", TABLE)
        if data is None:
            raise TableError(f"{name}: not found beside the check")
        text = data.decode("utf-8")
    rows = []
    for line, row in _rows(text, name):
        _validate(row, f"{name}:{line}")
        rows.append(row)
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise TableError(f"{name}: duplicate row ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    return rows


def _rows(text: str, name: str) -> Iterable[tuple[int, Any]]:
    """(line of the row's opening brace, row) for each element of the top-level array."""
    decoder = json.JSONDecoder()
    pos = _skip(text, 0)
    if not text.startswith("[", pos):
        raise TableError(f"{name}:{_line(text, pos)}: the table must be a JSON array of rows")
    pos = _skip(text, pos + 1)
    while not text.startswith("]", pos):
        try:
            row, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise TableError(f"{name}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        yield _line(text, pos), row
        pos = _skip(text, end)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif not text.startswith("]", pos):
            raise TableError(f"{name}:{_line(text, pos)}: expected ',' or ']' after a row")
    if text[pos + 1:].strip():
        raise TableError(f"{name}:{_line(text, _skip(text, pos + 1))}: text after the table's closing ']'")


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _validate(row: Any, where: str) -> None:
    if not isinstance(row, dict):
        raise TableError(f"{where}: a row must be an object")
    rid = row.get("id") or "?"
    missing = [key for key in _REQUIRED if key not in row]
    unknown = sorted(set(row) - set(_REQUIRED) - set(_OPTIONAL))
    if missing or unknown:
        raise TableError(f"{where}: row {rid}: missing {missing or 'nothing'}, "
                         f"unknown {unknown or 'nothing'}")
    if row["component"] not in COMPONENTS or row["kind"] not in KINDS:
        raise TableError(f"{where}: row {rid}: component must be one of {COMPONENTS}, kind one of {KINDS}")
    for key in ("title", "fix", "workaround"):
        if not (isinstance(row[key], dict) and all(isinstance(row[key].get(lang), str) and row[key][lang]
                                                   for lang in ("en", "zh"))):
            raise TableError(f"{where}: row {rid}: {key} needs non-empty en and zh text")
    if not (isinstance(row["sources"], list) and row["sources"]
            and all(isinstance(url, str) and url.startswith("https://") for url in row["sources"])):
        raise TableError(f"{where}: row {rid}: sources must list the threads' https URLs")
    if "affected" not in row and "log_all" not in row:
        raise TableError(f"{where}: row {rid}: needs affected versions or log_all lines (or both)")
    for spec in _listed(row, "affected"):
        if not isinstance(spec, str) or not _SPEC.match(spec):
            raise TableError(f"{where}: row {rid}: affected must list specifiers like \"==2.25.1\" or "
                             f"\">=2.3.0\", not {spec!r}")
    if "fixed_in" in row and not (isinstance(row["fixed_in"], str) and _VERSION.match(row["fixed_in"])):
        raise TableError(f"{where}: row {rid}: fixed_in must be a release like 2.26.2")
    for pattern in _listed(row, "log_all"):
        try:
            re.compile(pattern)  # type: ignore[arg-type]
        except (re.error, TypeError) as exc:
            raise TableError(f"{where}: row {rid}: log_all pattern {pattern!r}: {exc}") from None
    env = row.get("env", {})
    if not (isinstance(env, dict) and all(_ENV_NAME.match(str(k)) and isinstance(v, str) and v
                                          for k, v in env.items())):
        raise TableError(f"{where}: row {rid}: env must map NAME to a non-empty string value")
    if "upgrade" in row and not (isinstance(row["upgrade"], str) and row["upgrade"].strip()):
        raise TableError(f"{where}: row {rid}: upgrade must be a pip requirement")


def _listed(row: dict[str, Any], key: str) -> list[Any]:
    """The row's list under `key` ([] when absent; [value] when not a list, so it fails validation)."""
    if key not in row:
        return []
    value = row[key]
    if isinstance(value, list) and value:
        return value
    return [None if isinstance(value, list) else value]


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """(2, 3, 0) for "2.3.0+cu121", "2.3.0a0+git8837df1" or "2.3"; None when it is no version."""
    found = _VERSION.match(str(version or "").strip())
    if not found:
        return None
    parts = [int(p) for p in found.group(1).split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def satisfies(version: str, specs: Iterable[str]) -> bool:
    """Whether `version` meets every specifier (an unparsable version meets none)."""
    have = version_tuple(version)
    if have is None:
        return False
    for spec in specs:
        op, want_text = _SPEC.match(spec).groups()  # type: ignore[union-attr]
        want = version_tuple(want_text)
        ok = {"==": have == want, "!=": have != want, ">=": have >= want,  # type: ignore[operator]
              "<=": have <= want, ">": have > want, "<": have < want}[op]  # type: ignore[operator]
        if not ok:
            return False
    return True


def match(rows: list[dict[str, Any]], versions: dict[str, list[str]], log_lines: list[str] | None,
          ) -> list[dict[str, Any]]:
    """The rows that hold: each with the version and log lines that made it match."""
    found = []
    for row in rows:
        hit: dict[str, Any] = {"version": None, "log_lines": []}
        if "affected" in row:
            affected = [v for v in versions.get(row["component"], []) if satisfies(v, row["affected"])]
            if not affected:
                continue
            hit["version"] = affected[0]
        if "log_all" in row:
            lines = _log_hits(row["log_all"], log_lines or [])
            if lines is None:
                continue
            hit["log_lines"] = lines
        if hit["version"] is None and versions.get(row["component"]):
            hit["version"] = versions[row["component"]][0]
        found.append({**{k: row[k] for k in row if k != "log_all"}, **hit})
    return found


def _log_hits(patterns: list[str], lines: list[str]) -> list[str] | None:
    """The first line each pattern finds (trimmed), or None when one finds nothing."""
    hits = []
    for pattern in patterns:
        regex = re.compile(pattern)
        line = next((line for line in lines if regex.search(line)), None)
        if line is None:
            return None
        hits.append(line.strip()[:400])
    return hits

"""Round-trip YAML edits that keep a file as its author wrote it: comments, key order,
quoting, flow style, `null`, long lines, and the file's own indentation.

Used by `runbook migrate` and `runbook i18n stamp`. ruamel.yaml is imported only here,
and only when a file is edited, so `runbook --help` and the loader never pay for it.
"""

from __future__ import annotations

import difflib
import io
from typing import Any

import yaml as pyyaml

from runbook.format.safeyaml import LimitError, check_events

# (mapping, sequence, offset) indentations tried after the guessed one: the first that
# writes the untouched document back line for line is the file's own.
_INDENTS = ((2, 4, 2), (2, 2, 0), (4, 6, 4), (4, 4, 2), (4, 2, 0), (2, 3, 1), (3, 5, 3))
_WIDTH = 1 << 20  # never rewrap a long line


class RoundTripError(ValueError):
    """YAML that does not parse; `line` and `column` are 1-based."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(message)
        self.line, self.column, self.message = line, column, message


def load(text: str) -> tuple[Any, Any, int]:
    """(document, a writer set to the file's own layout, lines that writer still cannot keep
    as they are: 0 for a file written in one consistent style). Raises RoundTripError."""
    from ruamel.yaml.error import YAMLError

    try:  # the same bounds as every other reader, before ruamel builds anything
        check_events(text)
    except LimitError as exc:
        raise RoundTripError(exc.line, exc.column, exc.message) from None
    except pyyaml.YAMLError:
        pass  # not YAML: ruamel says where, below
    mapping, offset = guess_indent(text)
    candidates = [(mapping, max(mapping, offset + 2), offset), *_INDENTS]
    try:
        data = writer(*candidates[0]).load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise RoundTripError(line, column, f"YAML syntax error: {problem}") from None
    best: tuple[int, Any] | None = None
    for indent in dict.fromkeys(candidates):
        yaml = writer(*indent)
        relaid = _lines_changed(text, dump(yaml, data))
        if best is None or relaid < best[0]:
            best = (relaid, yaml)
        if relaid == 0:
            break
    assert best is not None
    return data, best[1], best[0]


def writer(mapping: int, sequence: int, offset: int) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip
    yaml.preserve_quotes = True
    yaml.width = _WIDTH
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    # `key: null` stays `null` (ruamel would write an empty value).
    yaml.representer.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    return yaml


def dump(yaml: Any, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


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


def _lines_changed(before: str, after: str) -> int:
    diff = difflib.ndiff(before.splitlines(), after.splitlines())
    return sum(line.startswith("+ ") for line in diff)

"""Bounded reading and parsing of files anyone can write: runbooks, articles, test files,
inventories, recordings.

runbook runs as root and reads files from pull requests and private search paths, so no
input may make it slow or large. Every refusal is a `LimitError` with the line and column it
was found at and a one-line reason, found in one linear pass and small memory:

- a file larger than its limit (never read past the limit);
- binary content (a NUL byte), with its byte offset;
- text that is not UTF-8, with its byte offset;
- aliases (`*name`) that expand the document beyond MAX_NODES values: nested aliases are how
  a file of a few hundred bytes expands to gigabytes ("billion laughs"). Aliases themselves
  are allowed (the library shares fix commands with them); each counts as the size of what it
  names;
- nesting deeper than MAX_DEPTH.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

RUNBOOK_MAX_BYTES = 1 << 20  # a runbook, a test file, an inventory
ARTICLE_MAX_BYTES = 1 << 20  # one language of a knowledge-base article
RECORDING_MAX_BYTES = 64 << 20  # a recorded incident: every check's raw answer on every node
MAX_DEPTH = 64
MAX_NODES = 100_000  # values, aliases expanded; the largest runbook has a few thousand

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class _Mark:
    """A position in the shape PyYAML's marks have (0-based), for MarkedYAMLError."""

    def __init__(self, line: int, column: int) -> None:
        self.line, self.column = line - 1, column - 1
        self.name, self.index, self.buffer, self.pointer = "<file>", 0, None, 0

    def __str__(self) -> str:
        return f"line {self.line + 1}, column {self.column + 1}"


class LimitError(yaml.MarkedYAMLError):
    """Input refused before it is parsed further. A YAMLError, so every YAML caller handles it."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(problem=message, problem_mark=_Mark(line, column))  # type: ignore[arg-type]
        self.message, self.line, self.column = message, line, column

    def __str__(self) -> str:
        return self.message


def read_text(path: str | Path, max_bytes: int = RUNBOOK_MAX_BYTES) -> tuple[str, bytes]:
    """(text, raw bytes) of a file of at most `max_bytes`. Raises LimitError or OSError."""
    with open(path, "rb") as fh:
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        size = Path(path).stat().st_size
        raise LimitError(f"file too large: {size:,} bytes, the limit is {max_bytes:,} bytes "
                         f"({max_bytes >> 20} MiB); split it")
    return decode(raw), raw


def decode(raw: bytes) -> str:
    """UTF-8 text, or LimitError naming the first NUL byte or invalid byte by its offset."""
    nul = raw.find(b"\0")
    if nul >= 0:
        raise LimitError(f"binary content (a NUL byte at byte offset {nul}); expected UTF-8 text",
                         *_line_column(raw, nul))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LimitError(f"not UTF-8 text ({exc.reason} at byte offset {exc.start})",
                         *_line_column(raw, exc.start)) from None


def _line_column(raw: bytes, offset: int) -> tuple[int, int]:
    line_start = raw.rfind(b"\n", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1, offset - line_start + 1


def check_events(text: str) -> None:
    """Refuse deep nesting and documents that are, or that aliases expand to, more than
    MAX_NODES values, reading the YAML's events once. Raises LimitError, or yaml.YAMLError for
    text that is not YAML."""
    try:
        loader = _Loader(text)
    except UnicodeEncodeError as exc:  # a lone surrogate: text that came from no real file
        line = text.count("\n", 0, exc.start) + 1
        column = exc.start - (text.rfind("\n", 0, exc.start) + 1) + 1
        raise LimitError(f"not UTF-8 text ({exc.reason} at character {exc.start})", line, column) from None
    sizes = _Sizes()
    try:
        while loader.check_event():
            sizes.add(loader.get_event())
    finally:
        loader.dispose()


class _Sizes:
    """Each open collection's expanded size so far; each anchor's expanded size once closed."""

    def __init__(self) -> None:
        self.open: list[tuple[int, str | None]] = []  # (size so far, its anchor)
        self.anchors: dict[str, int] = {}
        self.total = 0

    def add(self, event: yaml.Event) -> None:
        if isinstance(event, _OPEN):
            if len(self.open) >= MAX_DEPTH:
                raise LimitError(f"nested deeper than {MAX_DEPTH} levels", *_start(event))
            self._count(1, event)
            self.open.append((1, event.anchor))
        elif isinstance(event, _CLOSE):
            size, anchor = self.open.pop()
            if self.open:  # the children were counted in the total as they came
                inner, outer_anchor = self.open[-1]
                self.open[-1] = (inner + size, outer_anchor)
            if anchor is not None:
                self.anchors[anchor] = size
        elif isinstance(event, yaml.AliasEvent):
            self._count(self.anchors.get(event.anchor or "", 1), event, in_parent=True)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                self.anchors[event.anchor] = 1
            self._count(1, event, in_parent=True)

    def _count(self, size: int, event: yaml.Event, in_parent: bool = False) -> None:
        if in_parent and self.open:
            inner, anchor = self.open[-1]
            self.open[-1] = (inner + size, anchor)
        self.total += size
        if self.total > MAX_NODES:
            why = " once its aliases are expanded" if isinstance(event, yaml.AliasEvent) else ""
            raise LimitError(f"more than {MAX_NODES:,} values in one document{why}", *_start(event))


def _start(event: yaml.Event) -> tuple[int, int]:
    mark = event.start_mark
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def load(text: str) -> Any:
    """yaml.safe_load with the bounds above (for front matter, inventories, test files)."""
    check_events(text)
    return yaml.load(text, Loader=_Loader)  # noqa: S506  (a safe loader: plain data only)

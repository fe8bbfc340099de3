"""Helpers the fact extractors share: bounded lines, launcher prefixes, sizes in MiB.

Every extractor reads its lines through `clipped`, so a line of any length costs at most
`MAX_LINE` characters of matching, and caps its lists at `MAX_ITEMS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

MAX_LINE = 4096  # characters of a line that are matched; the rest is cut
MAX_ITEMS = 20  # entries kept in any list of facts
MAX_TEXT = 300  # characters kept of a quoted message

# Terminal escapes: CSI sequences (colours, cursor moves) and OSC ones (titles, hyperlinks).
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)")
# What launchers and loggers put before a line, removed one after another from its start:
# `[rank3]:`, `[1,2]<stdout>:`, `(TaskRunner pid=1234, ip=10.0.0.1)`, `[trainer0|0]:`, a timestamp.
_PREFIX = re.compile(
    r"\s*(?:\[rank\d+\]:|\[\d+,\d+\]<std(?:out|err)>:|\([\w.\-]+ pid=\d+(?:, ip=[\d.]+)?\)"
    r"|\[[\w|.\-]+\]:|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[\d.,]*)"
)
MIB_PER_UNIT = {"bytes": 1 / 1048576, "B": 1 / 1048576, "KiB": 1 / 1024, "MiB": 1.0,
                 "GiB": 1024.0, "TiB": 1048576.0}
UNIT = r"(bytes|KiB|MiB|GiB|TiB|B)"  # the units PyTorch prints sizes in


def clipped(lines: Sequence[str]) -> Iterator[str]:
    """Each line cut to MAX_LINE characters, ANSI colours removed; a str is split into lines."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    for line in lines:
        if not isinstance(line, str):
            continue
        line = line[:MAX_LINE]
        if "\x1b" in line:
            line = ANSI.sub("", line)
        yield line


def strip_prefixes(line: str) -> str:
    """The line without the launcher and logger prefixes at its start."""
    while True:
        m = _PREFIX.match(line)
        if not m or not m.group(0).strip():
            return line.strip()
        line = line[m.end():]


def to_mib(number: str, unit: str) -> float | None:
    """`2.00`, `GiB` -> 2048.0; None when the number does not parse."""
    try:
        return round(float(number) * MIB_PER_UNIT[unit], 2)
    except (KeyError, ValueError):
        return None


def add_once(items: list[Any], item: Any, cap: int = MAX_ITEMS) -> None:
    """Append `item` unless it is already there or the list holds `cap` items."""
    if len(items) < cap and item not in items:
        items.append(item)


def int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None

"""Where a matched line came from: which file, which host, which rank, and when.

`runbook triage DIR` and `runbook triage a.log b.log` read every rank's or node's log. A
person wants to hear "rank 1 on node-a ran out of memory at 09:39:10", so each line's rank is
read from its launcher's prefix (`[rank1]:`, `[default1]:`, `[1,1]<stderr>:`, srun's `1: `)
or else from the file's name (`rank1.log`, `worker-1.err`), its host from the file's
directory or name (`node-a/rank1.log`, `node-a.log`), and its time from the line's timestamp.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".stderr", ".stdout", ".jsonl")
# Folders whose name says nothing about a host (a rank log in one has no host).
GENERIC_FOLDERS = frozenset({"", "log", "logs", "output", "outputs", "out", "runs", "run", "tmp", "data",
                             "triage", "results", "stdout", "stderr", "slurm"})
MAX_FILES = 10_000  # in one directory tree: a mistyped `/` should not read the whole disk

LINE_RANK = re.compile(
    r"\[(?:rank|default|Rank) ?(\d+)\]:|\[\d+,(\d+)\]<std|^\s*(\d{1,5}): |\b[Rr]ank[ _:]?(\d+)\b")
_FILE_RANK = re.compile(r"(?:rank|local_rank|proc|worker|task|gpu)[_.\-]?(\d+)", re.IGNORECASE)
TIMESTAMP = re.compile(
    r"(?P<date>\d{4}[-/]\d{2}[-/]\d{2})?[T ]?(?<!\d)(?P<time>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,6}))?")


class SourceError(OSError):
    """An input that cannot be read as logs; one line for a person."""


@dataclass(frozen=True)
class Source:
    """One log file (or stdin) and what its path says about it."""

    path: str  # as the user gave it, or relative to the directory they gave
    host: str | None = None
    rank: int | None = None


def expand_inputs(inputs: list[str]) -> list[Source]:
    """Every log the arguments name: files as given, directories walked for log files (sorted),
    `-` for stdin. Raises SourceError for a path that does not exist."""
    sources: list[Source] = []
    for given in inputs:
        if given == "-":
            sources.append(Source("<stdin>"))
        elif os.path.isdir(given):
            sources.extend(_directory(Path(given)))
        elif os.path.exists(given):
            sources.append(_source(Path(given), None))
        else:
            raise SourceError(f"{given}: no such file or directory")
    return sources


def _directory(root: Path) -> list[Source]:
    found: list[Source] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.startswith(".") or not name.lower().endswith(LOG_SUFFIXES):
                continue
            found.append(_source(Path(folder) / name, root))
            if len(found) > MAX_FILES:
                raise SourceError(f"{root}: more than {MAX_FILES:,} log files; name a smaller directory")
    if not found:
        raise SourceError(f"{root}: no log files in it (looked for {', '.join(LOG_SUFFIXES)})")
    return found


def _source(path: Path, root: Path | None) -> Source:
    """A file's host and rank from its path: `node-a/rank1.log` is rank 1 on node-a, and so is
    `rank1.log` in a directory `node-a`; `node-a.log` among other logs is node-a's."""
    stem = path.name.split(".")[0]
    rank_match = _FILE_RANK.search(stem)
    rank = int(rank_match.group(1)) if rank_match else None
    folder = path.parent.resolve().name
    if root is not None and path.parent != root:
        host: str | None = path.parent.name
    elif rank is not None:
        host = None if folder.lower() in GENERIC_FOLDERS else folder
    elif root is not None:
        host = stem  # node-a.log in a directory of per-host logs
    else:
        host = None
    return Source(str(path), host, rank)


def line_rank(raw: str) -> int | None:
    """The rank a line's launcher prefix names, if any."""
    found = LINE_RANK.search(raw[:200])
    if not found:
        return None
    return int(next(g for g in found.groups() if g is not None))


def line_time(raw: str) -> str | None:
    """The line's timestamp as `YYYY-MM-DD HH:MM:SS[.ffffff]` (date when it has one), which
    sorts in time order, or None. Looked for near the start of the line only."""
    found = TIMESTAMP.search(raw[:80])
    if not found:
        return None
    date = (found.group("date") or "").replace("/", "-")
    frac = f".{found.group('frac')}" if found.group("frac") else ""
    return f"{date} {found.group('time')}{frac}".strip()


def earlier(a: str | None, b: str | None) -> bool | None:
    """Whether time `a` is before `b`; None when either is unknown. When only one has a date
    (torch's `[E1126 10:10:02.1 ...]` next to Python logging's `2026-11-26 09:39:10,1`), the
    times of day are compared."""
    if a is None or b is None:
        return None
    if (" " in a) != (" " in b):
        return time_of_day(a) < time_of_day(b)
    return a < b


def time_of_day(value: str) -> str:
    """`HH:MM:SS[.ffffff]` of a time from `line_time`."""
    return value.rsplit(" ", 1)[-1]

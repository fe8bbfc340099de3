"""Files of the `log` check: finding them, reading their ends, and summarising every rank's log.

Standard library only, like every check module.
"""

from __future__ import annotations

import glob
import os
import re
import time
from typing import Any

from runbook.checks.base import CheckContext
from runbook.checks.log import log_signals

PER_FILE_MAX = 64
PER_FILE_BYTES = 1_000_000  # read from the end of each file when analysing all files
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def matching_files(path: str) -> list[dict[str, Any]]:
    """Regular files the path (or glob) names, newest first."""
    names = glob.glob(path) if glob.has_magic(path) else [path]
    now = time.time()
    files: list[dict[str, Any]] = []
    for name in names:
        try:
            st = os.stat(name)
        except OSError:
            continue
        if os.path.isfile(name):
            files.append({"path": name, "size_bytes": st.st_size,
                          "age_s": round(now - st.st_mtime, 3), "_mtime": st.st_mtime})
    files.sort(key=lambda f: (-f["_mtime"], f["path"]))
    for entry in files:
        del entry["_mtime"]
    return files


def read_lines(path: str, max_bytes: int) -> list[str]:
    """Non-empty lines of the last `max_bytes` of a file (one read: the file may be growing)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        start = max(0, f.tell() - max_bytes)
        # From mid-file, read one byte more: it tells whether `start` begins a whole line.
        f.seek(max(0, start - 1))
        data = f.read(max_bytes + (1 if start else 0))
    if start > 0:
        # Drop the fragment before the first line break (a line cut by the byte limit).
        breaks = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
        data = data[min(breaks) + 1:] if breaks else data
    text = data.decode("utf-8", "replace")
    return [line for line in _LINE_BREAK.split(text) if line.strip()]


def all_files(
    files: list[dict[str, Any]], max_bytes: int, step_regex: re.Pattern[str], signatures: bool,
    ctx: CheckContext,
) -> dict[str, Any]:
    """Every matching file (every rank's log): age, last step and error signatures each."""
    limit = min(max_bytes, PER_FILE_BYTES)
    per_file = []
    for entry in files[:PER_FILE_MAX]:
        if ctx.remaining() < 0.5:
            break  # report the files analysed so far
        per_file.append(one_file(entry, limit, step_regex, signatures))
    slowest = max(files, key=lambda f: f["age_s"])
    return {"per_file": per_file, "slowest_file": slowest["path"],
            "age_spread_s": round(slowest["age_s"] - files[0]["age_s"], 3)}


def one_file(
    entry: dict[str, Any], limit: int, step_regex: re.Pattern[str], signatures: bool
) -> dict[str, Any]:
    summary: dict[str, Any] = {"path": entry["path"], "age_s": entry["age_s"],
                               "size_bytes": entry["size_bytes"], "lines_read": None,
                               "last_step": None, "signatures": {}, "first_signature": None,
                               "error": None}
    try:
        lines = read_lines(entry["path"], limit)
    except OSError as exc:
        summary["error"] = str(exc)
        return summary
    found = log_signals.scan_signatures(lines) if signatures else {}
    steps = log_signals.last_matches(lines, step_regex, 1)
    summary.update({
        "lines_read": len(lines),
        "last_step": log_signals.progress(lines, steps, None, None)["last_step"],
        "signatures": log_signals.counts(found),
        "first_signature": log_signals.first_signature(found),
    })
    return summary


def no_files() -> dict[str, Any]:
    return {"per_file": [], "slowest_file": None, "age_spread_s": None}

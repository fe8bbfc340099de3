"""`log`: read the end of a training log: how fresh it is, its last lines, and pattern matches."""

from __future__ import annotations

import glob
import os
import re
import time
from typing import Any

from runbook.checks.base import CheckContext

NAME = "log"
SUMMARY = {
    "en": "Read the end of a training log: last write time, last lines, and named regex matches",
    "zh": "读取训练日志末尾：最后写入时间、最后几行，以及各命名正则的匹配情况",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": 'Log file path, glob allowed (newest match is read); "" means none',
        },
        "tail": {"type": "integer", "minimum": 0, "maximum": 500, "default": 20,
                 "description": "How many last lines to return"},
        "patterns": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "name -> regex searched in every line read",
        },
        "max_bytes": {"type": "integer", "minimum": 1, "default": 4_000_000,
                      "description": "Read at most this many bytes from the end of the file"},
    },
    "additionalProperties": False,
}
_PATTERN_FIELDS = "count, last_line, last_line_no, last_groups, last_value"
RESULT_FIELDS = {
    "exists": {"type": "boolean", "en": "A log file was found and read",
               "zh": "找到并读取了日志文件"},
    "reason": {"type": "string", "en": "Why no log was read (null when one was)",
               "zh": "未能读取日志的原因（读取成功时为 null）"},
    "path": {"type": "string", "en": "The file analysed (the newest glob match)",
             "zh": "被分析的文件（glob 匹配中最新的一个）"},
    "files": {"type": "array",
              "en": "Every file the path matched, newest first: {path, size_bytes, age_s}",
              "zh": "路径匹配到的所有文件，最新的在前：{path, size_bytes, age_s}"},
    "size_bytes": {"type": "integer", "en": "Size of the file analysed", "zh": "被分析文件的大小"},
    "age_s": {"type": "number",
              "en": "Seconds since the file was last written (a hung job stops writing)",
              "zh": "距文件最后一次写入的秒数（作业卡住时日志会停止更新）"},
    "lines_read": {"type": "integer",
                   "en": "Non-empty lines read (from the last max_bytes; \\r also ends a line)",
                   "zh": "读取的非空行数（来自末尾 max_bytes 字节；\\r 也视为换行）"},
    "tail": {"type": "array", "en": "The last lines, each cut to 400 characters",
             "zh": "最后若干行，每行截断到 400 个字符"},
    "patterns": {"type": "object",
                 "en": f"Per pattern name: {{{_PATTERN_FIELDS}}}; last_line_no counts lines "
                       "read, last_value is the first group as a number",
                 "zh": f"每个模式名对应：{{{_PATTERN_FIELDS}}}；last_line_no 为在已读行中的行号，"
                       "last_value 为第一个捕获组转换成的数值"},
    "last_pattern": {"type": "string",
                     "en": "The pattern whose last match is latest in the log (null if none "
                           "matched)",
                     "zh": "最后一次匹配位置最靠后的模式名（都未匹配时为 null）"},
    "pattern_errors": {"type": "object", "en": "Patterns that are not valid regexes: name -> error",
                       "zh": "无效的正则表达式：模式名 -> 错误信息"},
}
DEFAULT_TIMEOUT = 10.0

_LINE_MAX = 400
_TAIL_MAX = 500
_FILES_MAX = 200
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    patterns = params.get("patterns") or {}
    path = str(params.get("path") or "").strip()
    if not path:
        return _missing("no log path given (--set log=PATH)", patterns)
    files = _matching_files(os.path.expanduser(path))
    if not files:
        return _missing(f"no file matches {path}" if glob.has_magic(path)
                        else f"{path} does not exist or is not a regular file", patterns)
    primary = files[0]
    max_bytes = max(1, _int(params.get("max_bytes"), 4_000_000))
    try:
        lines = _read_lines(primary["path"], max_bytes)
    except OSError as exc:
        return _missing(f"cannot read {primary['path']}: {exc}", patterns,
                        files=files[:_FILES_MAX])
    tail = min(max(_int(params.get("tail"), 20), 0), _TAIL_MAX)
    found, errors = scan_patterns(lines, patterns)
    return {
        "exists": True,
        "reason": None,
        "path": primary["path"],
        "files": files[:_FILES_MAX],
        "size_bytes": primary["size_bytes"],
        "age_s": primary["age_s"],
        "lines_read": len(lines),
        "tail": [line[:_LINE_MAX] for line in lines[-tail:]] if tail else [],
        "patterns": found,
        "last_pattern": _latest(found),
        "pattern_errors": errors,
    }


def _missing(reason: str, patterns: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The result when no log was read; every pattern is still present, with count 0."""
    found, errors = scan_patterns([], patterns)
    result: dict[str, Any] = {
        "exists": False, "reason": reason, "path": None, "files": [], "size_bytes": None,
        "age_s": None, "lines_read": 0, "tail": [], "patterns": found, "last_pattern": None,
        "pattern_errors": errors,
    }
    result.update(extra)
    return result


def _int(value: Any, default: int) -> int:
    if value is None or value == "" or isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _matching_files(path: str) -> list[dict[str, Any]]:
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


def _read_lines(path: str, max_bytes: int) -> list[str]:
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


def scan_patterns(
    lines: list[str], patterns: dict[str, Any]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Count each named regex over the lines and describe its last match."""
    compiled: dict[str, re.Pattern[str]] = {}
    errors: dict[str, str] = {}
    for name, source in patterns.items():
        try:
            compiled[name] = re.compile(str(source))
        except re.error as exc:
            errors[name] = str(exc)
    found = {name: _empty_match() for name in compiled}
    for number, line in enumerate(lines, start=1):
        for name, regex in compiled.items():
            m = regex.search(line)
            if m:
                _record(found[name], m, line, number)
    return found, errors


def _empty_match() -> dict[str, Any]:
    return {"count": 0, "last_line": None, "last_line_no": None, "last_groups": [],
            "last_value": None}


def _record(entry: dict[str, Any], m: re.Match[str], line: str, number: int) -> None:
    groups = ["" if g is None else g for g in m.groups()]
    entry["count"] += 1
    entry["last_line"] = line[:_LINE_MAX]
    entry["last_line_no"] = number
    entry["last_groups"] = groups
    entry["last_value"] = _number(groups[0]) if groups else None


def _number(text: str) -> float | None:
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


def _latest(found: dict[str, dict[str, Any]]) -> str | None:
    """Name of the pattern matched latest; on the same line, the one declared first."""
    best: str | None = None
    best_no = 0
    for name, entry in found.items():
        if entry["last_line_no"] is not None and entry["last_line_no"] > best_no:
            best, best_no = name, entry["last_line_no"]
    return best

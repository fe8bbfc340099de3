"""`file`: do files exist (checkpoints, dumps, sockets), how big and how old are they."""

from __future__ import annotations

import glob
import os
import stat
import time
from typing import Any

from runbook.checks.base import CheckContext

NAME = "file"
SUMMARY = {
    "en": "Files matching a path or glob: existence, sizes, ages, empty files",
    "zh": "匹配路径或 glob 的文件：是否存在、大小、修改时间、空文件",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1,
                 "description": "File or directory path; glob allowed (e.g. ckpt/*.pt)"},
        "min_size": {"type": "integer", "minimum": 0, "default": 1,
                     "description": "Regular files smaller than this many bytes count as empty"},
    },
    "required": ["path"],
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "exists": {"type": "boolean", "en": "At least one path matched", "zh": "至少匹配到一个路径"},
    "count": {"type": "integer", "en": "Number of paths matched", "zh": "匹配到的路径数"},
    "files": {"type": "array",
              "en": "Matches sorted by path, at most 200: {path, size_bytes, age_s, is_dir}",
              "zh": "按路径排序的匹配项，最多 200 个：{path, size_bytes, age_s, is_dir}"},
    "total_bytes": {"type": "integer", "en": "Total size of the regular files matched",
                    "zh": "匹配到的普通文件总大小（字节）"},
    "empty": {"type": "integer", "en": "Regular files smaller than min_size",
              "zh": "小于 min_size 的普通文件数"},
    "newest_age_s": {"type": "number",
                     "en": "Seconds since the most recent modification (null when none)",
                     "zh": "距最近一次修改的秒数（无匹配时为 null）"},
    "oldest_age_s": {"type": "number",
                     "en": "Seconds since the oldest modification (null when none)",
                     "zh": "距最早一次修改的秒数（无匹配时为 null）"},
}
DEFAULT_TIMEOUT = 5.0

_LIST_MAX = 200


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    path = os.path.expanduser(str(params["path"]))
    raw = params.get("min_size")
    min_size = 1 if raw is None or raw == "" else int(raw)
    now = time.time()
    entries = [e for e in (_entry(name, now) for name in _expand(path)) if e is not None]
    entries.sort(key=lambda e: e["path"])
    regular = [e for e in entries if e["_regular"]]
    ages = [e["age_s"] for e in entries]
    return {
        "exists": bool(entries),
        "count": len(entries),
        "files": [_public(e) for e in entries[:_LIST_MAX]],
        "total_bytes": sum(e["size_bytes"] for e in regular),
        "empty": sum(1 for e in regular if e["size_bytes"] < min_size),
        "newest_age_s": min(ages) if ages else None,
        "oldest_age_s": max(ages) if ages else None,
    }


def _expand(path: str) -> list[str]:
    if glob.has_magic(path):
        return glob.glob(path)
    return [path] if os.path.lexists(path) else []


def _entry(name: str, now: float) -> dict[str, Any] | None:
    try:
        st = os.stat(name)
    except OSError:
        try:
            st = os.lstat(name)  # a dangling symlink still "exists" as a path
        except OSError:
            return None
    return {
        "path": name,
        "size_bytes": st.st_size,
        "age_s": round(now - st.st_mtime, 3),
        "is_dir": stat.S_ISDIR(st.st_mode),
        "_regular": stat.S_ISREG(st.st_mode),
    }


def _public(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if not k.startswith("_")}

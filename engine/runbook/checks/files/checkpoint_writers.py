"""`checkpoint_writers`: did more than one node or rank write the same checkpoint path?

Two nodes whose local rank 0 saves (`local_rank == 0` instead of `rank == 0`, `save_on_each_node`
on shared storage) write one file at once: torch.save's zips lose their central directory, a
temporary file is renamed away under the other writer (`No such file or directory: 'tmp' ->
'last'`), NFS leaves `.nfs*` files. The evidence: the save lines of the run's logs (one path,
several hosts or ranks) and the checkpoint directory (truncated archives, temporary files left).
Standard library only; nothing in a checkpoint is unpickled.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
from typing import Any

from runbook.checks.base import CheckContext

NAME = "checkpoint_writers"
SUMMARY = {
    "en": "Who wrote a checkpoint: save lines of several hosts/ranks on one path, truncated archives, "
          "temporary files left",
    "zh": "谁写了检查点：多个主机/rank 向同一路径保存的日志行、被截断的归档、残留的临时文件",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1,
                 "description": "Checkpoint file or directory (a glob picks the newest)"},
        "logs": {"type": "string",
                 "description": "Logs of the run that saved it, one per node or rank: paths or globs "
                                "separated by spaces or os.pathsep"},
    },
    "required": ["path"],
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "exists": {"type": "boolean", "en": "Something matches path", "zh": "path 匹配到了文件或目录"},
    "dir": {"type": "string", "en": "The checkpoint directory examined", "zh": "实际检查的检查点目录"},
    "temp_files": {"type": "array", "en": "Temporary files left in it (*.tmp, tmp*, *.partial, .nfs*), "
                                          "at most 20",
                   "zh": "目录中残留的临时文件（*.tmp、tmp*、*.partial、.nfs*），最多 20 个"},
    "temp_count": {"type": "integer", "en": "Number of those files", "zh": "残留临时文件的数量"},
    "truncated": {"type": "array", "en": "Weight files cut short: {file, size_bytes, why} (a zip without "
                                         "its end-of-central-directory record, a safetensors file "
                                         "shorter than its header says), at most 20",
                  "zh": "被截断的权重文件：{file, size_bytes, why}（缺少中央目录结束记录的 zip、"
                        "比头部声明更短的 safetensors 文件），最多 20 个"},
    "truncated_count": {"type": "integer", "en": "Number of truncated weight files",
                        "zh": "被截断的权重文件数"},
    "logs_read": {"type": "integer", "en": "Log files read", "zh": "读取的日志文件数"},
    "shared": {"type": "array", "en": "Paths saved by more than one writer: {path, writers, lines} "
                                      "(writer = log/host/rank; at most 10 paths, 6 lines each)",
               "zh": "被多个写入者保存的路径：{path, writers, lines}（写入者 = 日志/主机/rank；"
                     "最多 10 个路径，每个 6 行）"},
    "shared_count": {"type": "integer", "en": "Number of such paths", "zh": "这类路径的数量"},
    "writers": {"type": "array", "en": "The writers of the first shared path",
                "zh": "第一个共享路径的写入者"},
    "reason": {"type": "string", "en": "What could not be read (null when all was)",
               "zh": "无法读取的内容（全部读取成功时为 null）"},
}
DEFAULT_TIMEOUT = 20.0

_LIST_MAX = 20
_SHARED_MAX = 10
_LINES_MAX = 6
_LOG_MAX_BYTES = 64 * 1024 * 1024  # the tail of each log that is read
_LOGS_MAX = 256
_WEIGHT_EXTS = (".pt", ".pth", ".bin", ".ckpt", ".tar", ".safetensors")
_TEMP = re.compile(r"(?:^\.nfs[0-9a-f]+|^tmp|\.tmp$|\.temp$|\.partial$|\.incomplete$|~$)", re.I)
_SAVE = re.compile(
    r"(?i)\b(?:sav(?:e|ed|ing)|writ(?:e|ing|ten)|stor(?:e|ed|ing))\b[^\n'\"]*?"
    r"\b(?:checkpoint|model|weights|state(?:_dict)?)s?\b[^\n'\"]*?(?:\b(?:to|in|at|into|as)\b|:)\s*"
    r"['\"]?(?P<path>/?[\w.~-][^\s'\",]*)")
_RANK = re.compile(r"(?i)\[rank\s*(\d+)\]|\brank[=: ]\s*(\d+)|^\s*(\d+):\s")
_HOST = re.compile(r"^\s*([A-Za-z][\w.-]*\d[\w.-]*):\s")  # pdsh / deepspeed launcher prefix "node1: "


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    result: dict[str, Any] = {name: None for name in RESULT_FIELDS}
    result.update(exists=False, temp_files=[], temp_count=0, truncated=[], truncated_count=0,
                  logs_read=0, shared=[], shared_count=0, writers=[])
    raw = os.path.expanduser(str(params["path"]))
    target = _newest(raw)
    problems: list[str] = []
    if target is not None:
        directory = target if os.path.isdir(target) else os.path.dirname(target) or "."
        result.update(exists=True, dir=directory, **scan_dir(directory))
    else:
        problems.append(f"nothing matches {raw}")
    shared, read, log_problems = scan_logs(_log_paths(str(params.get("logs") or "")), ctx)
    problems.extend(log_problems)
    result.update(logs_read=read, shared=shared[:_SHARED_MAX], shared_count=len(shared),
                  writers=shared[0]["writers"] if shared else [])
    result["reason"] = "; ".join(problems) or None
    return result


def _newest(path: str) -> str | None:
    if not glob.has_magic(path):
        return path if os.path.exists(path) else None
    matches = glob.glob(path)
    return max(matches, key=_mtime) if matches else None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


# -- the directory -------------------------------------------------------------------------------


def scan_dir(directory: str) -> dict[str, Any]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
    temps = [n for n in names if _TEMP.search(n)]
    cut: list[dict[str, Any]] = []
    for name in names:
        path = os.path.join(directory, name)
        if name.lower().endswith(_WEIGHT_EXTS) and os.path.isfile(path):
            why = truncation(path)
            if why:
                cut.append({"file": path, "size_bytes": os.path.getsize(path), "why": why})
    return {"temp_files": temps[:_LIST_MAX], "temp_count": len(temps),
            "truncated": cut[:_LIST_MAX], "truncated_count": len(cut)}


def truncation(path: str) -> str | None:
    """Why a weight file is cut short, or None: a zip's end record is written last, a safetensors
    header names the bytes its tensors need."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if size == 0:
                return "empty (0 bytes)"
            if path.endswith(".safetensors"):
                length = int.from_bytes(head, "little")
                if length > size - 8:
                    return f"header length {length} exceeds the file ({size} bytes)"
                header = json.loads(f.read(length))
                header.pop("__metadata__", None)
                end = max((int(v["data_offsets"][1]) for v in header.values()), default=0)
                return f"tensors need {8 + length + end} bytes, the file has {size}" \
                    if 8 + length + end > size else None
            if head[:4] != b"PK\x03\x04":
                return None  # a legacy torch file or not a zip: nothing to say without loading it
            f.seek(max(0, size - 65536 - 22))
            if b"PK\x05\x06" not in f.read():
                return "zip without its end-of-central-directory record (written partly)"
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        return f"unreadable ({type(exc).__name__})"
    return None


# -- the logs ------------------------------------------------------------------------------------


def _log_paths(spec: str) -> list[str]:
    paths: list[str] = []
    for part in re.split(rf"[\s{re.escape(os.pathsep)}]+", spec.strip()):
        if not part:
            continue
        part = os.path.expanduser(part)
        paths.extend(sorted(glob.glob(part)) if glob.has_magic(part) else [part])
    return list(dict.fromkeys(paths))[:_LOGS_MAX]


def scan_logs(paths: list[str], ctx: CheckContext) -> tuple[list[dict[str, Any]], int, list[str]]:
    """(paths saved by more than one writer, logs read, problems)."""
    writers: dict[str, dict[str, list[str]]] = {}  # path -> writer -> lines
    read = 0
    problems: list[str] = []
    many = len(paths) > 1
    for path in paths:
        if time.monotonic() >= ctx.deadline - 0.5:  # keep time to answer
            problems.append("out of time reading the logs")
            break
        try:
            lines = _tail_lines(path)
        except OSError as exc:
            problems.append(f"cannot read {path}: {exc.strerror or exc}")
            continue
        read += 1
        label = os.path.basename(path) if many else ""
        for index, line in enumerate(lines):
            if index % 20000 == 19999 and time.monotonic() >= ctx.deadline - 0.5:
                problems.append(f"out of time in {path} at line {index + 1} of {len(lines)}")
                break
            found = save_target(line)
            if found is None:
                continue
            who = writer(line, label)
            writers.setdefault(found, {}).setdefault(who, []).append(line.strip()[:300])
    shared = [{"path": p, "writers": sorted(w),
               "lines": [lines[-1] for lines in list(w.values())[:_LINES_MAX]]}
              for p, w in writers.items() if len(w) > 1]
    return shared, read, problems


def _tail_lines(path: str) -> list[str]:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - _LOG_MAX_BYTES))
        return f.read().decode("utf-8", "replace").splitlines()


def save_target(line: str) -> str | None:
    """The path a save line names (trailing punctuation and slash dropped), else None."""
    match = _SAVE.search(line)
    if not match:
        return None
    path = match.group("path").rstrip(".;:)]").rstrip("/")
    return path if ("/" in path or "." in path) and len(path) > 1 else None


def writer(line: str, label: str) -> str:
    """Who wrote a line: log file, host prefix, rank; "?" when nothing tells."""
    parts = [label] if label else []
    host = _HOST.match(line)
    if host:
        parts.append(host.group(1))
        line = line[host.end():]
    rank = _RANK.search(line)
    if rank:
        parts.append("rank" + next(g for g in rank.groups() if g is not None))
    return "/".join(parts) or "?"

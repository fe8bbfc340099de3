"""`known_issues`: the node's torch and NCCL versions, and the known bugs of those releases.

The versions come from the training process when one is tied to the job (the `nccl` check's
reading of /proc/PID/maps: every libnccl it mapped; torch's `version.py` beside the libtorch it
mapped), else from `torch` and `nccl_version` given by the runbook (what the log printed), else
from importing torch in the job's interpreter (the `torch` check, only with `import_torch`).
They are matched against `known_regressions.json` (`_regressions.py`): releases with bugs that a
thread's maintainers confirmed, each with its fix and the job's workaround. A row that names log
lines (`log_all`) is matched against the end of `log` as well.
"""

from __future__ import annotations

import os
import re
from typing import Any

from runbook.checks.base import CheckContext
from runbook.checks.distributed import _regressions, nccl, torch_info
from runbook.checks.log import log_files

NAME = "known_issues"
SUMMARY = {
    "en": "torch and NCCL versions of the training process (or given from its log) matched against a "
          "table of releases with confirmed known bugs: each match with its fix and workaround",
    "zh": "训练进程的 torch 与 NCCL 版本（或来自日志的版本）与已确认已知缺陷的版本表比对："
          "每个匹配项给出修复版本和规避方法",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": {"type": ["integer", "string"], "description": 'The training process ("" means not given)'},
        "match": {"type": "string",
                  "description": "Regex searched in each process's full command line (first match is used)"},
        "log": {"type": "string",
                "description": "The job's log (a glob reads the newest file): ties the process, and its "
                               "last MiB is searched for the rows' log lines; \"\" means none"},
        "torch": {"type": "string",
                  "description": "torch version to use when no process shows one (e.g. from the log); "
                                 "\"\" means not given"},
        "nccl_version": {"type": "string",
                         "description": "NCCL version the log printed (\"NCCL version 2.25.1\"), added to "
                                        "the ones the process maps; \"\" means not given"},
        "import_torch": {"type": "boolean",
                         "description": "With no torch version otherwise, import torch in the job's "
                                        "interpreter to ask (default true; slow on a loaded node)"},
    },
    "additionalProperties": False,
}
_MATCH_FIELDS = ("id, component, kind, title {en, zh}, version (the affected one found), affected, "
                 "fixed_in, fix {en, zh}, workaround {en, zh}, env, upgrade, sources, log_lines")
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "The table was read and at least one version or log was examined",
                  "zh": "读取了版本表，并至少检查了一个版本或日志"},
    "reason": {"type": "string", "en": "Why nothing could be matched (null when something was)",
               "zh": "无法比对的原因（有可比对内容时为 null）"},
    "pid": {"type": "integer", "en": "The training process examined (null when none)",
            "zh": "被检查的训练进程（没有时为 null）"},
    "torch_version": {"type": "string", "en": "torch version found (e.g. 2.3.0+cu121; null when unknown)",
                      "zh": "找到的 torch 版本（如 2.3.0+cu121；未知时为 null）"},
    "nccl_versions": {"type": "array", "en": "NCCL versions found: mapped by the process, then the log's",
                      "zh": "找到的 NCCL 版本：先是进程映射的，然后是日志中的"},
    "version_sources": {"type": "object",
                        "en": "Where each version came from: {torch: maps|param|import, nccl: [maps, log]}",
                        "zh": "每个版本的来源：{torch: maps|param|import, nccl: [maps, log]}"},
    "log": {"type": "string", "en": "The log file searched (null when none)",
            "zh": "被搜索的日志文件（没有时为 null）"},
    "table_rows": {"type": "integer", "en": "Rows in the table of known bugs", "zh": "已知缺陷表中的行数"},
    "matches": {"type": "array", "en": f"Known bugs that hold here: {{{_MATCH_FIELDS}}}",
                "zh": f"在此处成立的已知缺陷：{{{_MATCH_FIELDS}}}"},
    "matched_ids": {"type": "array", "en": "ids of the matches", "zh": "匹配项的 id"},
    "matched_kinds": {"type": "array", "en": "Kinds of the matches (watchdog, abort-hang), distinct",
                      "zh": "匹配项的类别（watchdog、abort-hang），去重"},
    "watchdog": {"type": "object", "en": "The first match of kind watchdog (null when none)",
                 "zh": "第一个 watchdog 类匹配项（没有时为 null）"},
    "abort_hang": {"type": "object", "en": "The first match of kind abort-hang (null when none)",
                   "zh": "第一个 abort-hang 类匹配项（没有时为 null）"},
}
DEFAULT_TIMEOUT = 40.0

LOG_BYTES = 1_000_000
_TORCH_LIB = re.compile(r"^(.*/torch)/lib/libtorch[^/]*\.so")
_TORCH_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    result: dict[str, Any] = {name: None for name in RESULT_FIELDS}
    result.update(matches=[], matched_ids=[], matched_kinds=[], nccl_versions=[], version_sources={})
    try:
        rows = _regressions.load()
    except _regressions.TableError as exc:
        return {**result, "available": False, "reason": str(exc)}
    result["table_rows"] = len(rows)
    log = _text(params.get("log"))
    setup = nccl.run({"pid": params.get("pid"), "match": params.get("match"), "log": log}, ctx) \
        if _selects(params) else {"pid": None, "nccl_versions": []}
    pid = setup.get("pid")
    result["pid"] = pid
    nccl_versions, sources = list(setup.get("nccl_versions") or []), {}
    if nccl_versions:
        sources["nccl"] = ["maps"]
    logged = _text(params.get("nccl_version"))
    if logged and logged not in nccl_versions:
        nccl_versions.append(logged)
        sources.setdefault("nccl", []).append("log")
    torch_version, sources["torch"] = _torch_version(pid, params, ctx)
    if sources["torch"] is None:
        del sources["torch"]
    result.update(torch_version=torch_version, nccl_versions=nccl_versions, version_sources=sources)
    lines, result["log"] = _log_lines(log)
    versions = {"torch": [torch_version] if torch_version else [], "nccl": nccl_versions}
    if not (torch_version or nccl_versions or lines):
        return {**result, "available": False,
                "reason": setup.get("reason") or "no torch or NCCL version and no log to match"}
    matches = _regressions.match(rows, versions, lines)
    kinds = list(dict.fromkeys(m["kind"] for m in matches))
    first = {kind: next((m for m in matches if m["kind"] == kind), None) for kind in _regressions.KINDS}
    return {**result, "available": True, "reason": None, "matches": matches,
            "matched_ids": [m["id"] for m in matches], "matched_kinds": kinds,
            "watchdog": first["watchdog"], "abort_hang": first["abort-hang"]}


def _text(value: Any) -> str:
    return str(value).strip() if value not in (None, "") else ""


def _selects(params: dict[str, Any]) -> bool:
    """Whether the params name a process, or a log that may tie one."""
    return any(_text(params.get(key)) for key in ("pid", "match", "log"))


def _torch_version(pid: int | None, params: dict[str, Any],
                   ctx: CheckContext) -> tuple[str | None, str | None]:
    """(version, source): the libtorch the process maps, else the param, else an import."""
    if pid is not None:
        found = torch_of_process(pid)
        if found:
            return found, "maps"
    given = _text(params.get("torch"))
    if given:
        return given, "param"
    if params.get("import_torch", True) and pid is not None and ctx.remaining() > 5:
        info = torch_info.run({"pid": pid}, ctx)
        if info.get("available") and info.get("version"):
            return info["version"], "import"
    return None, None


def torch_of_process(pid: int) -> str | None:
    """torch.__version__ from the version.py beside the libtorch the process maps (no import)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as fh:
            for raw in fh:
                found = _TORCH_LIB.match(raw.decode("utf-8", "replace").split(None, 5)[-1].strip())
                if found:
                    return read_torch_version(found.group(1))
    except OSError:
        return None
    return None


def read_torch_version(torch_dir: str) -> str | None:
    try:
        with open(os.path.join(torch_dir, "version.py"), encoding="utf-8", errors="replace") as fh:
            text = fh.read(16384)
    except OSError:
        return None
    found = _TORCH_VERSION.search(text)
    return found.group(1) if found else None


def _log_lines(log: str) -> tuple[list[str], str | None]:
    """The last MiB of the newest file the log names, as lines (none when it names no file)."""
    if not log:
        return [], None
    files = log_files.matching_files(log)
    if not files:
        return [], None
    path = files[0]["path"]
    try:
        return log_files.read_lines(path, LOG_BYTES), path
    except OSError:
        return [], path


"""`log`: read the end of a training log: freshness, last lines, patterns, errors, loss, progress.

Known error signatures, loss statistics and progress live in log_signals.py; the facts of the
error messages themselves (OOM amounts and other processes, NCCL's causes, the watchdog's
SeqNum, the rendezvous count, Xids) come from checks/facts/.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from runbook.checks import facts as message_facts
from runbook.checks.base import CheckContext
from runbook.checks.facts._text import ANSI
from runbook.checks.log import log_signals
from runbook.checks.log.log_files import PER_FILE_MAX, all_files, matching_files, no_files, read_lines

NAME = "log"
SUMMARY = {
    "en": "Read the end of a training log (or every rank's): last write time, last lines, named regex "
          "matches, known error signatures, loss statistics and training progress",
    "zh": "读取训练日志末尾（或每个 rank 的日志）：最后写入时间、最后几行、各命名正则的匹配、"
          "已知错误特征、loss 统计和训练进度",
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
        "signatures": {"type": "boolean", "default": True,
                       "description": "Count known error signatures (CUDA OOM, NCCL errors, ...)"},
        "loss_window": {"type": "integer", "minimum": 1, "maximum": 100_000, "default": 50,
                        "description": "Loss statistics and progress use the last N values "
                                       "(pattern `loss`, else a default loss regex; `step` likewise)"},
        "facts": {"type": "boolean", "default": True,
                  "description": "Read the facts of well-known error messages (checks/facts/)"},
        "stall_after": {"type": ["number", "string"],
                        "description": "Seconds without a write after which the log counts as "
                                       "stopped: sets `progressing` (\"\" means not given)"},
        "all_files": {"type": "boolean", "default": False,
                      "description": "Analyse every file the glob matches (every rank's log), "
                                     f"at most {PER_FILE_MAX}"},
    },
    "additionalProperties": False,
}
_PATTERN_FIELDS = "count, last_line, last_line_no, last_groups, last_value"
_SIGNATURE_NAMES = ", ".join(log_signals.SIGNATURES)
_LOSS_FIELDS = "count, last, last_raw, first, min, max, mean, trend, nan_count, inf_count"
_LR_FIELDS = "count, first, last, min, max, distinct"
_PROGRESS_FIELDS = "last_step, steps_per_min, basis, seconds_since_progress"
_PER_FILE_FIELDS = ("path, age_s, size_bytes, lines_read, last_step, signatures, first_signature, "
                    "error")
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
    "signatures": {"type": "object",
                   "en": f"Known error signatures ({_SIGNATURE_NAMES}): name -> {{count, first_line_no, "
                         "last_line_no, last_line}; every name present ({} when signatures: false)",
                   "zh": f"已知错误特征（{_SIGNATURE_NAMES}）：名称 -> {{count, first_line_no, "
                         "last_line_no, last_line}；所有名称都会出现（signatures: false 时为 {}）"},
    "first_signature": {"type": "string",
                        "en": "The error signature seen first (traceback aside): usually the cause",
                        "zh": "最先出现的错误特征（traceback 除外）：通常就是起因"},
    "loss_stats": {"type": "object",
                   "en": f"The last loss_window loss values: {{{_LOSS_FIELDS}}}; last is null when "
                         "NaN/Inf (last_raw shows it), trend compares the halves: down, up, flat",
                   "zh": f"最近 loss_window 个 loss 值的统计：{{{_LOSS_FIELDS}}}；最后一个值为 NaN/Inf 时 "
                         "last 为 null（见 last_raw），trend 比较前后两半：down、up、flat"},
    "lr_stats": {"type": "object",
                 "en": f"The last loss_window learning-rate values printed (the pattern named `lr` "
                       f"when it has a group, else lr/learning_rate lines): {{{_LR_FIELDS}}}; distinct "
                       "is how many different values: 1 over many steps means no schedule is applied",
                 "zh": f"最近 loss_window 个打印出的学习率（有分组时用名为 `lr` 的模式，否则读 lr/"
                       f"learning_rate 行）：{{{_LR_FIELDS}}}；distinct 为不同取值的个数："
                       "许多步都只有 1 个取值说明没有应用任何调度"},
    "progress": {"type": "object",
                 "en": f"Training progress: {{{_PROGRESS_FIELDS}}}; basis of steps_per_min: timestamps "
                       "(in the step lines), printed_rate (it/s, ms per iteration), file_times (whole "
                       "file read: its creation to last write) or none; seconds_since_progress is the "
                       "file's age when its last line is a step line, else null",
                 "zh": f"训练进度：{{{_PROGRESS_FIELDS}}}；steps_per_min 的依据 basis："
                       "timestamps（步数行中的时间戳）、printed_rate（日志打印的 it/s 或每次迭代毫秒数）、"
                       "file_times（读完整个文件时，按文件创建到最后写入的时间）或 none；"
                       "最后一行是步数行时 seconds_since_progress 为文件的未更新时长，否则为 null"},
    "facts": {"type": "object",
              "en": "Facts of the error messages read, per family present (cuda_oom, nccl, watchdog, "
                    "rendezvous, xid; see `runbook show check:log`): amounts, PIDs, devices, "
                    "versions, sequence numbers",
              "zh": "已读取的错误信息中的事实，按出现的类别（cuda_oom、nccl、watchdog、rendezvous、"
                    "xid）：数量、PID、设备、版本、序号"},
    "progressing": {"type": "boolean",
                    "en": "With stall_after: the log was written within stall_after seconds (the "
                          "node's own evidence that its rank moves); null without it or without a log",
                    "zh": "给出 stall_after 时：日志在 stall_after 秒内有写入（本节点 rank 在推进的直接"
                          "证据）；未给出或没有日志时为 null"},
    "per_file": {"type": "array",
                 "en": f"With all_files: one entry per matching file, newest first (at most "
                       f"{PER_FILE_MAX}): {{{_PER_FILE_FIELDS}}}; signatures holds nonzero counts",
                 "zh": f"all_files 为 true 时，每个匹配文件一项，最新的在前（最多 {PER_FILE_MAX} 个）："
                       f"{{{_PER_FILE_FIELDS}}}；signatures 只含非零计数"},
    "slowest_file": {"type": "string",
                     "en": "With all_files: the file written longest ago (the rank that stopped first)",
                     "zh": "all_files 为 true 时，最久未写入的文件（最先停下的 rank）"},
    "age_spread_s": {"type": "number",
                     "en": "With all_files: seconds between the newest and the oldest last write",
                     "zh": "all_files 为 true 时，最新与最旧的最后写入时间之差（秒）"},
}
DEFAULT_TIMEOUT = 10.0

_LINE_MAX = 400
_TAIL_MAX = 500
_FILES_MAX = 200


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    patterns = params.get("patterns") or {}
    path = str(params.get("path") or "").strip()
    if not path:
        return _missing("no log path given (--set log=PATH)", params)
    files = matching_files(os.path.expanduser(path))
    if not files:
        return _missing(f"no file matches {path}" if glob.has_magic(path)
                        else f"{path} does not exist or is not a regular file", params)
    primary = files[0]
    max_bytes = max(1, _int(params.get("max_bytes"), 4_000_000))
    try:
        lines = read_lines(primary["path"], max_bytes)
    except OSError as exc:
        return _missing(f"cannot read {primary['path']}: {exc}", params, files=files[:_FILES_MAX])
    tail = min(max(_int(params.get("tail"), 20), 0), _TAIL_MAX)
    found, errors = scan_patterns(lines, patterns)
    result: dict[str, Any] = {
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
        "facts": message_facts.extract(lines) if params.get("facts", True) else {},
        "progressing": _progressing(primary["age_s"], params.get("stall_after")),
    }
    whole = primary["size_bytes"] <= max_bytes
    result.update(_analyse(lines, params, primary, ctx if whole else None))
    if params.get("all_files"):
        result.update(all_files(files, max_bytes, _step_regex(patterns), bool(params.get("signatures", True)),
                                ctx))
    else:
        result.update(no_files())
    return result


def _missing(reason: str, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The result when no log was read; every pattern and signature is still present, count 0."""
    found, errors = scan_patterns([], params.get("patterns") or {})
    result: dict[str, Any] = {
        "exists": False, "reason": reason, "path": None, "files": [], "size_bytes": None,
        "age_s": None, "lines_read": 0, "tail": [], "patterns": found, "last_pattern": None,
        "pattern_errors": errors, "facts": {}, "progressing": None,
    }
    result.update(_analyse([], params, {"path": None, "age_s": None}, None))
    result.update(no_files())
    result.update(extra)
    return result


def _analyse(
    lines: list[str], params: dict[str, Any], entry: dict[str, Any], ctx: CheckContext | None
) -> dict[str, Any]:
    """Signatures, loss statistics and progress; `ctx` only when the whole file was read."""
    window = max(1, _int(params.get("loss_window"), 50))
    signatures = log_signals.scan_signatures(lines) if params.get("signatures", True) else {}
    patterns = params.get("patterns") or {}
    loss = log_signals.last_matches(lines, _regex(patterns, "loss", log_signals.DEFAULT_LOSS), window)
    steps = log_signals.last_matches(lines, _step_regex(patterns), window)
    rates = log_signals.last_matches(lines, _regex(patterns, "lr", log_signals.DEFAULT_LR), window)
    span = None if ctx is None else (lambda: _file_span(entry["path"], ctx))
    return {
        "signatures": signatures,
        "first_signature": log_signals.first_signature(signatures),
        "loss_stats": log_signals.loss_stats([value for _, value, _ in loss]),
        "lr_stats": log_signals.lr_stats([value for _, value, _ in rates]),
        "progress": log_signals.progress(lines, steps, entry["age_s"], span),
    }


def _progressing(age_s: float | None, stall_after: Any) -> bool | None:
    """Whether the log moves: written within `stall_after` seconds (None when either is unknown)."""
    try:
        limit = float(stall_after)
    except (TypeError, ValueError):
        return None
    return None if age_s is None else age_s < limit


def _regex(patterns: dict[str, Any], name: str, default: str) -> re.Pattern[str]:
    """The runbook's pattern `name` when it compiles and has a group, else the default."""
    try:
        regex = re.compile(str(patterns[name]))
        if regex.groups:
            return regex
    except (KeyError, re.error):
        pass
    return re.compile(default)


def _step_regex(patterns: dict[str, Any]) -> re.Pattern[str]:
    return _regex(patterns, "step", log_signals.DEFAULT_STEP)


def _file_span(path: str, ctx: CheckContext) -> float | None:
    """Seconds from the file's creation (birth) to its last write; None where unknown."""
    outcome = ctx.run_command(["stat", "-c", "%W %Y", path], timeout=min(1.0, ctx.remaining()))
    try:
        birth, mtime = (int(x) for x in outcome.stdout.split())
    except ValueError:
        return None
    return float(mtime - birth) if 0 < birth < mtime else None


def _int(value: Any, default: int) -> int:
    if value is None or value == "" or isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def scan_patterns(
    lines: list[str], patterns: dict[str, Any]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Count each named regex over the lines and describe its last match.

    Lines are matched and quoted as a terminal shows them: without colour codes, so a
    pattern never has to skip them and a quote never carries their residue.
    """
    compiled: dict[str, re.Pattern[str]] = {}
    errors: dict[str, str] = {}
    for name, source in patterns.items():
        try:
            compiled[name] = re.compile(str(source))
        except re.error as exc:
            errors[name] = str(exc)
    found = {name: _empty_match() for name in compiled}
    for number, line in enumerate(lines, start=1):
        if "\x1b" in line:
            line = ANSI.sub("", line)
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

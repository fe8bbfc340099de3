"""`command`: run a shell command on the node and report its exit code and output."""

from __future__ import annotations

import re
from typing import Any

from runbook.checks.base import CheckContext

NAME = "command"
SUMMARY = {
    "en": "Run a read-only shell command and capture its exit code and output",
    "zh": "运行只读的 shell 命令，记录退出码和输出",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run": {"type": "string", "minLength": 1, "description": "Command line, run by /bin/sh"},
        "match": {"type": "string", "description": "Regex searched in stdout; sets `matched`"},
        "max_chars": {"type": "integer", "minimum": 1, "default": 8000,
                      "description": "Keep the last N characters of stdout and of stderr "
                                     "(default 8000); the output is read whole, keeping its "
                                     "first and last 128 kB (or N) in memory"},
    },
    "required": ["run"],
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "exit_code": {"type": "integer", "en": "Exit status (null when killed)",
                  "zh": "退出码（被终止时为 null）"},
    "ok": {"type": "boolean", "en": "Exit status was 0", "zh": "退出码为 0"},
    "stdout": {"type": "string", "en": "Standard output (its last max_chars characters)",
               "zh": "标准输出（最后 max_chars 个字符）"},
    "stderr": {"type": "string", "en": "Standard error (its last max_chars characters)",
               "zh": "标准错误（最后 max_chars 个字符）"},
    "matched": {"type": "boolean", "en": "`match` was found in stdout", "zh": "stdout 中找到了 `match`"},
    "not_found": {"type": "boolean", "en": "The shell could not be started", "zh": "无法启动 shell"},
    "stdout_bytes": {"type": "integer", "en": "Bytes the command wrote to stdout in all",
                     "zh": "命令写到 stdout 的总字节数"},
    "stderr_bytes": {"type": "integer", "en": "Bytes the command wrote to stderr in all",
                     "zh": "命令写到 stderr 的总字节数"},
    "truncated": {"type": "boolean",
                  "en": "The output was too large to keep whole: its middle was dropped and a "
                        "`[runbook: output truncated: ...]` line marks the place",
                  "zh": "输出太大无法完整保留：中间部分被丢弃，"
                        "并以 `[runbook: output truncated: ...]` 一行标出位置"},
}
DEFAULT_TIMEOUT = 10.0
SHELL_PARAMS = ("run",)  # a command line: values put into it by templates are shell-quoted

_MAX_SHOWN = 8_000
_CAPTURED = 256_000  # what run_command keeps of each stream: its first and last half
_CAPTURED_MAX = 64 << 20


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    shown = _max_chars(params.get("max_chars"))
    # The whole output is read and its first and last parts kept, so its end is really the end
    # (and a command that prints gigabytes costs no more than this).
    outcome = ctx.run_command(params["run"], shell=True,
                              max_output=min(_CAPTURED_MAX, max(_CAPTURED, 2 * shown)))
    result: dict[str, Any] = {
        "exit_code": outcome.returncode,
        "ok": outcome.returncode == 0,
        "stdout": outcome.stdout[-shown:],
        "stderr": outcome.stderr[-shown:],
        "timed_out": outcome.timed_out,
        "not_found": outcome.not_found,
        "stdout_bytes": outcome.stdout_bytes,
        "stderr_bytes": outcome.stderr_bytes,
        "truncated": outcome.truncated,
    }
    if "match" in params:
        result["matched"] = re.search(params["match"], outcome.stdout, re.MULTILINE) is not None
    return result


def _max_chars(value: Any) -> int:
    """max_chars as a positive int; templating may hand it over as text ("" = not given)."""
    try:
        return max(1, int(value)) if value not in (None, "") else _MAX_SHOWN
    except (TypeError, ValueError):
        return _MAX_SHOWN

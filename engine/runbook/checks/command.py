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
                      "description": "Keep the last N characters of stdout and of stderr, read "
                                     "from the whole output (default: of its first 256 kB)"},
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
}
DEFAULT_TIMEOUT = 10.0
SHELL_PARAMS = ("run",)  # a command line: values put into it by templates are shell-quoted

_MAX_SHOWN = 8_000
_CAPTURED = 256_000  # what run_command keeps by default (from the start of the output)


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    shown = _max_chars(params.get("max_chars"))
    # Given max_chars, read the whole output so that its end is really the end; without it, as
    # before: the end of the first 256 kB.
    captured = _CAPTURED if params.get("max_chars") in (None, "") else 1 << 62
    outcome = ctx.run_command(params["run"], shell=True, max_output=captured)
    result: dict[str, Any] = {
        "exit_code": outcome.returncode,
        "ok": outcome.returncode == 0,
        "stdout": outcome.stdout[-shown:],
        "stderr": outcome.stderr[-shown:],
        "timed_out": outcome.timed_out,
        "not_found": outcome.not_found,
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

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
    },
    "required": ["run"],
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "exit_code": {"type": "integer", "en": "Exit status (null when killed)",
                  "zh": "退出码（被终止时为 null）"},
    "ok": {"type": "boolean", "en": "Exit status was 0", "zh": "退出码为 0"},
    "stdout": {"type": "string", "en": "Standard output (truncated)", "zh": "标准输出（截断）"},
    "stderr": {"type": "string", "en": "Standard error (truncated)", "zh": "标准错误（截断）"},
    "matched": {"type": "boolean", "en": "`match` was found in stdout", "zh": "stdout 中找到了 `match`"},
    "not_found": {"type": "boolean", "en": "The shell could not be started", "zh": "无法启动 shell"},
}
DEFAULT_TIMEOUT = 10.0
SHELL_PARAMS = ("run",)  # a command line: values put into it by templates are shell-quoted

_MAX_SHOWN = 8_000


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    outcome = ctx.run_command(params["run"], shell=True)
    result: dict[str, Any] = {
        "exit_code": outcome.returncode,
        "ok": outcome.returncode == 0,
        "stdout": outcome.stdout[-_MAX_SHOWN:],
        "stderr": outcome.stderr[-_MAX_SHOWN:],
        "timed_out": outcome.timed_out,
        "not_found": outcome.not_found,
    }
    if "match" in params:
        result["matched"] = re.search(params["match"], outcome.stdout, re.MULTILINE) is not None
    return result

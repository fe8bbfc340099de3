"""`env`: environment variables of a process (or of the probe), with secrets redacted."""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any

from runbook.checks import _procfs
from runbook.checks.base import CheckContext

NAME = "env"
SUMMARY = {
    "en": "Environment variables of a process or of the probe (NCCL_*, MASTER_ADDR...), "
          "secrets redacted",
    "zh": "进程或探针自身的环境变量（NCCL_*、MASTER_ADDR 等），敏感值已脱敏",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pid": {
            "type": ["integer", "string"],
            "description": 'Read /proc/PID/environ of this process ("" = the probe\'s own)',
        },
        "names": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["*"],
            "description": 'Variable names or fnmatch patterns such as "NCCL_*"',
        },
    },
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "source": {"type": "string",
               "en": "process (a process's starting environment) or probe (the probe's own)",
               "zh": "process（目标进程启动时的环境）或 probe（探针自身的环境）"},
    "pid": {"type": "integer", "en": "The process read (the probe's pid for source probe)",
            "zh": "读取的进程 PID（source 为 probe 时是探针自身的 PID）"},
    "readable": {"type": "boolean", "en": "The environment could be read",
                 "zh": "能够读取该环境"},
    "reason": {"type": "string", "en": "Why it could not be read (null when readable)",
               "zh": "无法读取的原因（可读时为 null）"},
    "vars": {"type": "object",
             "en": "name -> value for the requested names; secrets shown as ***redacted***",
             "zh": "请求的变量名 -> 值；敏感值显示为 ***redacted***"},
    "missing": {"type": "array", "en": "Requested names (without wildcards) that are not set",
                "zh": "请求的（不含通配符的）变量名中未设置的那些"},
    "count": {"type": "integer", "en": "Number of variables in vars", "zh": "vars 中的变量数"},
}
DEFAULT_TIMEOUT = 3.0

REDACTED = "***redacted***"
_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
# scheme://userinfo@host -> scheme://***@host (userinfo holds passwords and tokens)
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@")


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    names = params.get("names") or ["*"]
    if isinstance(names, str):
        names = [names]
    pid = _pid_param(params.get("pid"))
    if pid is None:
        return _answer("probe", os.getpid(), dict(ctx.env), names)
    try:
        env = _procfs.environ(pid)
    except FileNotFoundError:
        return _unreadable(pid, f"no process with pid {pid}")
    except PermissionError:
        return _unreadable(pid, f"permission denied reading /proc/{pid}/environ "
                                "(run as the process's user or root)")
    except OSError as exc:
        return _unreadable(pid, f"cannot read /proc/{pid}/environ: {exc}")
    return _answer("process", pid, env, names)


def _pid_param(value: Any) -> int | None:
    if value is None or isinstance(value, bool) or str(value).strip() == "":
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return -1


def _unreadable(pid: int, reason: str) -> dict[str, Any]:
    return {"source": "process", "pid": pid, "readable": False, "reason": reason, "vars": {},
            "missing": [], "count": 0}


def _answer(source: str, pid: int, env: dict[str, str], names: list[str]) -> dict[str, Any]:
    chosen: dict[str, str] = {}
    missing: list[str] = []
    for pattern in names:
        pattern = str(pattern)
        if _is_pattern(pattern):
            chosen.update({k: v for k, v in env.items() if fnmatch.fnmatchcase(k, pattern)})
        elif pattern in env:
            chosen[pattern] = env[pattern]
        elif pattern not in missing:
            missing.append(pattern)
    shown = {name: redact(name, chosen[name]) for name in sorted(chosen)}
    return {"source": source, "pid": pid, "readable": True, "reason": None, "vars": shown,
            "missing": missing, "count": len(shown)}


def _is_pattern(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def redact(name: str, value: str) -> str:
    """The value to show for a variable: secrets hidden, credentials removed from URLs."""
    upper = name.upper()
    if any(word in upper for word in _SECRET_WORDS):
        return REDACTED
    return _URL_USERINFO.sub(r"\1***@", value)

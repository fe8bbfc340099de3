"""`python`: run a Python snippet from the runbook in a subprocess and return the dict it builds.

The snippet runs in the interpreter the step names (the training environment's, to import
torch or the job's own code), never in the probe: a crash, a hang or noisy output cannot
hurt the probe. Its answer comes back through a file, so whatever it prints is only output.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any

from runbook.checks.base import CheckContext, CommandOutcome

NAME = "python"
SUMMARY = {
    "en": "Run a Python snippet (in the training environment's interpreter if given) that builds a "
          "dict `result` or defines check(); return that dict",
    "zh": "运行一段 Python 代码（可指定训练环境的解释器），代码构造字典 `result` 或定义 check()，返回该字典",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "minLength": 1,
                 "description": "Python source that sets `result` to a dict, or defines check() "
                                "returning one; PID holds the pid parameter (or None)"},
        "python": {"type": "string", "minLength": 1,
                   "description": "Interpreter to run it with (default: the probe's own)"},
        "pid": {"type": ["integer", "string"],
                "description": 'A process id handed to the snippet as PID ("" = none)'},
    },
    "required": ["code"],
    "additionalProperties": False,
}
RESULT_FIELDS = {
    "available": {"type": "boolean", "en": "The interpreter could be started",
                  "zh": "解释器可以启动"},
    "reason": {"type": "string", "en": "Why the interpreter could not be started (null when it was)",
               "zh": "解释器无法启动的原因（正常时为 null）"},
    "ok": {"type": "boolean", "en": "The snippet ran and produced a dict",
           "zh": "代码运行完成并产生了字典"},
    "value": {"type": "object",
              "en": "The dict the snippet produced, made JSON-safe (other values as text; null "
                    "when not ok)",
              "zh": "代码产生的字典，已转换为可 JSON 序列化的形式（其他类型转为文本；失败时为 null）"},
    "error": {"type": "string",
              "en": "Why it failed: the exception's last traceback line, a timeout, or an early exit",
              "zh": "失败原因：异常回溯的最后一行、超时或提前退出"},
    "traceback": {"type": "string", "en": "The end of the snippet's traceback (null when none)",
                  "zh": "代码异常回溯的末尾（无异常时为 null）"},
    "stdout_tail": {"type": "string", "en": "The last 2000 characters the snippet printed",
                    "zh": "代码标准输出的最后 2000 个字符"},
    "stderr_tail": {"type": "string", "en": "The last 2000 characters of its standard error",
                    "zh": "代码标准错误输出的最后 2000 个字符"},
    "exit_code": {"type": "integer", "en": "The interpreter's exit code (null when killed)",
                  "zh": "解释器的退出码（被终止时为 null）"},
    "python": {"type": "string", "en": "The interpreter used", "zh": "使用的解释器"},
}
DEFAULT_TIMEOUT = 30.0

_TAIL = 2000
# Runs in the chosen interpreter (any Python 3): exec the snippet, write its answer as JSON.
_RUNNER = r'''
import json, math, sys, traceback

def clean(value, depth=0):
    if depth > 50:
        return repr(value)[:200]
    if isinstance(value, dict):
        return {str(k): clean(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [clean(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)

def main():
    code_path, out_path, pid = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(code_path) as f:
        source = f.read()
    space = {"__name__": "__runbook_snippet__", "PID": int(pid) if pid else None}
    try:
        exec(compile(source, "<snippet>", "exec"), space)
        if "result" in space:
            value = space["result"]
        elif callable(space.get("check")):
            value = space["check"]()
        else:
            raise NameError("the snippet defines neither `result` nor `check()`")
        if not isinstance(value, dict):
            raise TypeError("result is a {}, not a dict".format(type(value).__name__))
        answer = {"ok": True, "value": clean(value)}
    except BaseException as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        answer = {"ok": False, "error": last, "traceback": traceback.format_exc()[-4000:]}
    with open(out_path, "w") as f:
        json.dump(answer, f, allow_nan=False)

main()
'''


def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    python = str(params.get("python") or sys.executable)
    code = str(params.get("code") or "")
    pid = params.get("pid")
    pid_text = str(pid).strip() if pid not in (None, "") and str(pid).strip().isdigit() else ""
    workdir = tempfile.mkdtemp(prefix="runbook-python-")
    try:
        paths = {name: os.path.join(workdir, name) for name in ("runner.py", "snippet.py", "answer")}
        _write(paths["runner.py"], _RUNNER)
        _write(paths["snippet.py"], code)
        outcome = ctx.run_command([python, paths["runner.py"], paths["snippet.py"], paths["answer"],
                                   pid_text], timeout=ctx.remaining())
        return _result(python, outcome, _answer(paths["answer"]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _answer(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            answer = json.load(f)
    except (OSError, ValueError):
        return None  # killed, or the interpreter exited before writing
    return answer if isinstance(answer, dict) else None


def _result(python: str, outcome: CommandOutcome, answer: dict[str, Any] | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "available": not outcome.not_found, "reason": None, "ok": False, "value": None,
        "error": None, "traceback": None, "stdout_tail": outcome.stdout[-_TAIL:],
        "stderr_tail": outcome.stderr[-_TAIL:], "exit_code": outcome.returncode,
        "python": python, "timed_out": outcome.timed_out,
    }
    if outcome.not_found:
        result["reason"] = result["error"] = f"cannot run {python}: {outcome.stderr}"
    elif outcome.timed_out:
        result["error"] = f"the snippet did not finish within {outcome.duration_s:.1f}s (killed)"
    elif answer is None:
        last = (outcome.stderr.strip().splitlines() or ["no output"])[-1][:300]
        result["error"] = f"{python} exited with code {outcome.returncode} before answering: {last}"
    else:
        result.update({"ok": bool(answer.get("ok")), "value": answer.get("value"),
                       "error": answer.get("error"), "traceback": answer.get("traceback")})
    return result

"""Every tool call in the audit log `runbook run --apply` writes (run/audit.py, same default file):
which tool, its arguments (long text shortened, secrets redacted), whether it answered or failed
and why, and how long it took. Fixes a call executes add their own entries, as from the command
line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runbook.run.audit import append_entry, who_and_when
from runbook.run.redact import Redactor

ARGUMENT_CHARS = 200  # a pasted log is summarised, not copied into the log
EVENT = "mcp-tool"


def record_call(path: Path, tool: str, arguments: dict[str, Any], error: str | None,
                duration_s: float) -> None:
    entry = {**who_and_when(), "event": EVENT, "tool": tool, "arguments": shortened(arguments),
             "status": "error" if error else "ok", "error": error, "duration_s": round(duration_s, 3)}
    secrets = arguments.get("set") if isinstance(arguments.get("set"), dict) else {}
    append_entry(path, entry, Redactor.for_params(secrets or {}))


def shortened(value: Any) -> Any:
    """`value` with every long string cut to its start and its length."""
    if isinstance(value, dict):
        return {k: shortened(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shortened(v) for v in value]
    if isinstance(value, str) and len(value) > ARGUMENT_CHARS:
        return f"{value[:80]}... ({len(value)} characters)"
    return value


def check_writable(path: Path) -> None:
    """Raises OSError when the log cannot be appended to: the server then does not start, since
    a call it could not record must not run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise OSError(f"--audit-log {path}: cannot be written ({exc.strerror or exc})") from None

"""The audit log: one JSON line per act, appended, with who did it, from where and when.

`runbook run --apply` writes one entry per executed fix (run/fixes.py); `runbook mcp` one per
tool call; `runbook alerts serve` one per alert's run. All go to the same file
(`$XDG_STATE_HOME/runbook/audit.jsonl` unless told otherwise), each entry redacted before it
is written: a secret never reaches the log.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runbook.run.redact import Redactor


def default_audit_log() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "runbook" / "audit.jsonl"


def who_and_when() -> dict[str, str]:
    """The fields every entry starts with."""
    return {"time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "user": _user(), "from_host": socket.gethostname()}


def append_entry(path: Path, entry: dict[str, Any], redactor: Redactor) -> None:
    """`entry`, redacted, as one more line of the log at `path` (its folder made if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:  # one line per entry, appended atomically enough
        fh.write(json.dumps(redactor.data(entry), ensure_ascii=False) + "\n")


def append_audit(path: Path | None, fields: dict[str, Any], redactor: Redactor) -> None:
    """Who, when and from where, then `fields`, as one line of the log at `path` (None: no log)."""
    if path is not None:
        append_entry(path, {**who_and_when(), **fields}, redactor)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name (containers): the uid is still who it was
        return str(os.getuid())

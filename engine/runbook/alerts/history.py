"""What the alerts' runs found, kept in the state directory.

    STATE/reports/NAME.json   the run's `runbook-report/v1` document (report/json.py)
    STATE/reports/NAME.html   the same report as one page (report/html.py)
    STATE/history.jsonl       one line per finished run: the alert, the conclusions, the report

NAME is the time the run started, the alert's name and its fingerprint, so reports sort by
time and say which alert they answer. The page and the notifications read the history.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runbook.alerts.payload import Alert
from runbook.alerts.queue import write_atomic

TAIL_BYTES = 512 * 1024  # how much of the history the page reads: the latest runs
_SLUG = re.compile(r"[^A-Za-z0-9_-]+")
_REPORT = re.compile(r"\d{8}T\d{6}Z-[A-Za-z0-9_-]{0,40}-[0-9A-Za-z]{1,64}\.(json|html)")
# Worst first: a node that could not be diagnosed ranks below a warning, above what is fine.
_RANK = {"critical": 0, "warning": 1, "unknown": 2, "info": 3, "ok": 4}


def report_name(alert: Alert, started: str) -> str:
    """`20260301T101500Z-TrainingLossNaN-3f2a...` for a run started at `started` (UTC, compact)."""
    return f"{started}-{_SLUG.sub('_', alert.name)[:40]}-{alert.fingerprint}"


def conclusions(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each node's ending, worst first: conclusion id, title and severity, or why it has none."""
    rows = []
    for node in report.get("nodes", []):
        conclusion = node.get("conclusion") or {}
        rows.append({"node": node.get("node"), "status": node.get("status"),
                     "id": conclusion.get("id"), "title": conclusion.get("title") or node.get("reason"),
                     "severity": conclusion.get("severity") or "unknown"})
    return sorted(rows, key=lambda r: _RANK.get(r["severity"], 2))


@dataclass
class History:
    state: Path
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.reports = self.state / "reports"
        self.reports.mkdir(parents=True, exist_ok=True)
        self.log = self.state / "history.jsonl"

    def save_report(self, name: str, as_json: str, as_html: str) -> None:
        write_atomic(self.reports / f"{name}.json", as_json)
        write_atomic(self.reports / f"{name}.html", as_html)

    def report_file(self, file_name: str) -> Path | None:
        """The report file of that name (NAME.json or NAME.html), None for any other name."""
        path = self.reports / file_name
        return path if _REPORT.fullmatch(file_name) and path.is_file() else None

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock, self.log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest finished runs, newest first."""
        try:
            with self.log.open("rb") as fh:
                start = max(0, fh.seek(0, 2) - TAIL_BYTES)
                fh.seek(start)
                lines = fh.read().decode("utf-8", "replace").splitlines()[1 if start else 0:]
        except OSError:  # (from the middle of the file, the first line is cut)
            return []
        entries = []
        for line in reversed(lines):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
            if len(entries) >= limit:
                break
        return entries

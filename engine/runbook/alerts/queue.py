"""The alerts waiting for their diagnosis, on disk, so that a restart loses none.

    STATE/queue/ID.json   one job: the alert, what it runs, how often a run of it started
    STATE/seen.json       the alerts already taken (fingerprint@startsAt), with when

Every file is written whole to a temporary file, synced and renamed over the old one: a crash
leaves the old or the new content, never half. A job's file goes only once its run has ended
(`done`); one whose run was cut short by a crash or a restart is run again when the receiver
starts, up to MAX_ATTEMPTS times. An alert is taken when its job file or seen.json says so:
seen.json is written when a job leaves the queue, before its file goes, so the intake (while
Alertmanager waits) writes one file per alert, and no crash loses or doubles one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runbook.alerts.payload import Alert, PayloadError, parse_alert
from runbook.alerts.routing import RunRequest

MAX_ATTEMPTS = 3
SEEN_MAX = 10_000  # the oldest are forgotten first
SEEN_DAYS = 30
JOB_MAX_BYTES = 1 << 20


class QueueFull(Exception):
    """More jobs wait than the limit allows; Alertmanager retries the notification later."""


@dataclass(frozen=True)
class Job:
    id: str
    alert: Alert
    request: RunRequest
    received_at: str
    attempts: int = 0  # runs of it that started
    silence: str | None = None  # the Alertmanager silence its run holds

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "alert": self.alert.to_json(), "request": self.request.to_json(),
                "received_at": self.received_at, "attempts": self.attempts, "silence": self.silence}


@dataclass
class AlertQueue:
    state: Path
    limit: int = 100
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _seen: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.folder = self.state / "queue"
        self.folder.mkdir(parents=True, exist_ok=True)
        self._seen = _read_seen(self.state / "seen.json")

    def pending(self) -> list[Job]:
        """The jobs on disk, oldest first (at start: what the last process left undone)."""
        jobs = []
        for path in sorted(self.folder.glob("*.json")):
            job = _read_job(path)
            if job is not None:
                jobs.append(job)
        with self._lock:  # a job on disk is an alert taken, whatever seen.json says
            self._seen.update({job.alert.key: self._seen.get(job.alert.key, time.time()) for job in jobs})
        return jobs

    def offer(self, alert: Alert, request: RunRequest) -> Job | None:
        """Queue the alert's run; None when the alert was taken before. Raises QueueFull."""
        with self._lock:
            if alert.key in self._seen:
                return None
            if sum(1 for _ in self.folder.glob("*.json")) >= self.limit:
                raise QueueFull(f"{self.limit} alerts already wait for a diagnosis")
            now = time.time()
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now * 1e6) % 1_000_000:06d}"
            job = Job(f"{stamp}-{alert.fingerprint}", alert, request,
                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)))
            self._write(job)
            self._seen[alert.key] = now  # on disk as the job file until done() saves it
            return job

    def started(self, job: Job) -> Job:
        """Count a run of the job as started (on disk, before it runs)."""
        job = replace(job, attempts=job.attempts + 1)
        self._write(job)
        return job

    def update(self, job: Job) -> None:
        self._write(job)

    def done(self, job: Job) -> None:
        """The job leaves the queue; its alert stays taken (seen.json first, then the file goes)."""
        with self._lock:
            self._save_seen()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.folder / f"{job.id}.json")

    def waiting(self) -> int:
        return sum(1 for _ in self.folder.glob("*.json"))

    def _write(self, job: Job) -> None:
        write_atomic(self.folder / f"{job.id}.json", json.dumps(job.to_json(), ensure_ascii=False))

    def _save_seen(self) -> None:
        horizon = time.time() - SEEN_DAYS * 86400
        kept = sorted(((t, k) for k, t in self._seen.items() if t >= horizon), reverse=True)[:SEEN_MAX]
        self._seen = {k: t for t, k in kept}
        write_atomic(self.state / "seen.json", json.dumps(self._seen))


def write_atomic(path: Path, text: str) -> None:
    """`text` in `path`, whole or not at all, and on the disk before this returns."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:  # the rename itself, on the disk
        os.fsync(folder)
    finally:
        os.close(folder)


def _read_job(path: Path) -> Job | None:
    """A queued job, or None (a file that is not one is set aside as .bad, and said so)."""
    try:
        with path.open("rb") as fh:
            data = json.loads(fh.read(JOB_MAX_BYTES).decode("utf-8"))
        request = RunRequest.from_json(data["request"])
        return Job(str(data["id"]), parse_alert(data["alert"]), request, str(data["received_at"]),
                   int(data.get("attempts") or 0), data.get("silence") or None)
    except (OSError, ValueError, KeyError, TypeError, PayloadError) as exc:
        print(f"runbook alerts: {path.name} is not a queued job ({exc}); moved to {path.name}.bad",
              file=sys.stderr)
        with contextlib.suppress(OSError):
            os.replace(path, path.with_name(path.name + ".bad"))
        return None


def _read_seen(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)} if isinstance(
        data, dict) else {}

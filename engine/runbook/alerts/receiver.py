"""The receiver put together: the HTTP server takes notifications in, the workers run the jobs,
and a start picks up the jobs a previous process left on disk."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runbook.alerts import intake, page
from runbook.alerts.auth import Credentials
from runbook.alerts.history import History
from runbook.alerts.notify import Notifier
from runbook.alerts.payload import PayloadError, parse_notification
from runbook.alerts.queue import MAX_ATTEMPTS, AlertQueue, Job, QueueFull
from runbook.alerts.routing import Router
from runbook.alerts.runner import Answering, Diagnose, Runner
from runbook.alerts.server import AlertServer, Refused
from runbook.alerts.silence import Silencer
from runbook.alerts.workers import Workers


@dataclass
class Settings:
    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 9095
    workers: int = 2
    max_queue: int = 100
    max_body: int = 1 << 20
    lang: str = "en"
    public_url: str | None = None  # the base of report links in notifications
    open_page: bool = False  # the page and reports without credentials (behind a proxy)
    run_timeout_s: float = 300.0
    audit_log: Path | None = None


class Receiver:
    """Implements server.App; `start()`, then `serve_forever()` until `close()`."""

    def __init__(self, settings: Settings, router: Router, credentials: Credentials, diagnose: Diagnose,
                 silencer: Silencer | None = None, notifier: Notifier | None = None) -> None:
        self.settings, self.router, self.credentials = settings, router, credentials
        self.max_body, self.open_page, self.lang = settings.max_body, settings.open_page, settings.lang
        self.queue = AlertQueue(settings.state_dir, settings.max_queue)
        self.history = History(settings.state_dir)
        self.runner = Runner(diagnose, self.queue, Answering(self.history, settings.lang, "",
                                                             settings.audit_log, silencer, notifier),
                             settings.run_timeout_s)
        self.workers = Workers(settings.workers, self._run)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.server: AlertServer | None = None

    def start(self) -> str:
        """Listen (raises OSError), resume the jobs left on disk; the URL it listens on."""
        self.server = AlertServer((self.settings.host, self.settings.port), self)
        host, port = str(self.server.server_address[0]), int(self.server.server_address[1])
        url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self.runner.out.public_url = (self.settings.public_url or url).rstrip("/")
        self.workers.start()
        for job in self.queue.pending():
            self._resume(job)
        return url

    def serve_forever(self) -> None:
        assert self.server is not None
        self.server.serve_forever(poll_interval=0.2)

    def close(self) -> None:
        """Stop taking alerts and starting runs; what is queued stays on disk for the next start."""
        self.workers.stop()
        if self.server is not None:
            self.server.server_close()

    def _resume(self, job: Job) -> None:
        if job.attempts >= MAX_ATTEMPTS:
            self.runner.give_up(job, f"not run: its run was cut short {job.attempts} times "
                                     "(the receiver stopped during each)")
            return
        print(f"runbook alerts: resuming {job.alert.name} ({job.alert.fingerprint}): "
              f"{job.request.runbook}", file=sys.stderr)
        self.workers.submit(job)

    def _run(self, job: Job) -> None:
        entry = self.runner.run(job)
        self._count("failed" if entry.get("error") else "finished")

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    # -- server.App --------------------------------------------------------------------

    def take(self, body: bytes) -> dict[str, Any]:
        try:
            notification = parse_notification(body)
        except PayloadError as exc:
            self._count("refused")
            raise Refused(400, str(exc)) from None
        self._count("notifications")
        try:
            taken = intake.take(notification, self.router, self.queue, self.workers.submit)
        except QueueFull as exc:
            self._count("refused")
            raise Refused(503, f"{exc}; try again later") from None
        except OSError as exc:  # the state directory cannot be written: Alertmanager retries
            self._count("refused")
            raise Refused(503, f"cannot queue the alerts: {exc.strerror or exc}") from None
        for what, n in (("queued", len(taken.queued)), ("duplicate", taken.duplicate),
                        ("resolved", taken.resolved), ("unmapped", taken.unmapped)):
            self._count(what, n)
        return taken.to_json()

    def status(self) -> dict[str, Any]:
        running = self.workers.busy()
        with self._lock:
            counts = dict(self.counts)
        return {"waiting": max(0, self.queue.waiting() - len(running)), "running": running, "counts": counts}

    def page(self) -> bytes:
        now = self.status()
        return page.render(self.history.recent(), now["waiting"], len(now["running"]), self.lang)

    def report_file(self, name: str) -> Path | None:
        return self.history.report_file(name)


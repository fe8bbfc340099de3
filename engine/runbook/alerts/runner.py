"""One queued alert, diagnosed and answered.

    counted as started (on disk) -> a silence while it runs (optional) -> the diagnosis ->
    the reports and the history -> the audit log -> the notification (optional) -> off the queue

The diagnosis is `runbook run`'s own function, handed in by `cli/alerts/` as `diagnose`:
(what to run, the fix policy) -> the report. The policy is read-only at most: a run started by
an alert shows every fix and applies none, unless its route allows the `read-only` ones;
changes-state and disruptive fixes never run from here. Each run, and each fix it runs, goes to
the audit log with the alert's fingerprint.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runbook.alerts.history import History, conclusions, report_name
from runbook.alerts.notify import Notifier
from runbook.alerts.queue import AlertQueue, Job
from runbook.alerts.routing import RunRequest
from runbook.alerts.silence import Silencer
from runbook.run.audit import append_audit
from runbook.run.fixes import FixPolicy
from runbook.run.redact import Redactor

ALERT_EFFECTS = ("read-only",)  # the most a run started by an alert may ever apply


class DiagnosisFailed(Exception):
    """The run could not start (a bad parameter, a Slurm job that ended...): one line."""


Diagnose = Callable[[RunRequest, FixPolicy], dict[str, Any]]


@dataclass
class Answering:
    """Where the answers go."""

    history: History
    lang: str
    public_url: str
    audit_log: Path | None = None
    silencer: Silencer | None = None
    notifier: Notifier | None = None


@dataclass
class Runner:
    diagnose: Diagnose
    queue: AlertQueue
    out: Answering
    run_timeout_s: float = 300.0

    def run(self, job: Job) -> dict[str, Any]:
        """Run the job to its end; the history entry it left."""
        job = self.queue.started(job)
        silence = self._silence(job)
        started = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        try:
            report, error = self.diagnose(job.request, self.fix_policy(job)), None
        except DiagnosisFailed as exc:
            report, error = None, str(exc)
        except Exception as exc:  # a bug must not stop the receiver: this alert fails, it says why
            traceback.print_exc(file=sys.stderr)
            report, error = None, f"internal error: {type(exc).__name__}: {exc}"
        finally:
            if silence and self.out.silencer:
                self.out.silencer.expire(silence)
        entry = self._answer(job, report, error, report_name(job.alert, started))
        self.queue.done(job)
        return entry

    def give_up(self, job: Job, reason: str) -> dict[str, Any]:
        """Answer a job that will not run again (its runs kept being cut short) with `reason`."""
        if job.silence and self.out.silencer:
            self.out.silencer.expire(job.silence)
        entry = self._answer(job, None, reason, report_name(job.alert, time.strftime("%Y%m%dT%H%M%SZ",
                                                                                      time.gmtime())))
        self.queue.done(job)
        return entry

    def fix_policy(self, job: Job) -> FixPolicy:
        return FixPolicy(apply=job.request.fixes == "read-only", interactive=False, effects=ALERT_EFFECTS,
                         audit_log=self.out.audit_log, redactor=Redactor.for_params(job.request.params),
                         context={"alert": job.alert.fingerprint, "alertname": job.alert.name})

    def _silence(self, job: Job) -> str | None:
        silencer = self.out.silencer
        if silencer is None:
            return None
        if job.silence:  # the silence of a run cut short (the receiver was stopped): end it first
            silencer.expire(job.silence)
        silence = silencer.create(job.alert, job.request.runbook, self.run_timeout_s)
        self.queue.update(replace(job, silence=silence))
        return silence

    def _answer(self, job: Job, report: dict[str, Any] | None, error: str | None,
                name: str) -> dict[str, Any]:
        out = self.out
        if report is not None:
            from runbook.report import get_reporter

            out.history.save_report(name, get_reporter("json", lang=out.lang).render(report),
                                    get_reporter("html", lang=out.lang).render(report))
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "job": job.id,
                 "alert": {"name": job.alert.name, "fingerprint": job.alert.fingerprint,
                           "startsAt": job.alert.starts_at, "labels": job.alert.labels},
                 "runbook": job.request.runbook,
                 "nodes": [n["node"] for n in report["nodes"]] if report else job.request.nodes,
                 "conclusions": conclusions(report) if report else [],
                 "exit_code": report["summary"]["exit_code"] if report else None,
                 "fixes": job.request.fixes, "report": name if report else None, "error": error}
        out.history.record(entry)
        append_audit(out.audit_log, {
            "event": "alert-run", "alert": job.alert.fingerprint, "alertname": job.alert.name,
            "starts_at": job.alert.starts_at, "runbook": job.request.runbook,
            "version": report["runbook"]["version"] if report else None, "nodes": entry["nodes"],
            "exit_code": entry["exit_code"], "fixes": job.request.fixes, "report": entry["report"],
            "error": error}, Redactor.for_params(job.request.params))
        if out.notifier is not None:
            out.notifier.send(entry, f"{out.public_url}/reports/{name}.html" if report else None)
        return entry


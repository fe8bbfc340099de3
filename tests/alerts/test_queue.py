"""alerts/queue.py: jobs on disk, deduplicated, surviving a restart; alerts/runner.py and
alerts/workers.py over it, with a stand-in diagnosis (the real one: test_alertmanager.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runbook.alerts.history import History
from runbook.alerts.payload import Alert
from runbook.alerts.queue import AlertQueue, QueueFull
from runbook.alerts.routing import RunRequest
from runbook.alerts.runner import Answering, DiagnosisFailed, Runner
from runbook.alerts.workers import Workers
from runbook.run.fixes import FixPolicy

REQUEST = RunRequest("nan-loss", ["gpu01"], None, {"log": "/l"}, "read-only")


def alert(fingerprint: str = "f1", starts: str = "2026-03-01T10:15:00Z") -> Alert:
    return Alert("firing", {"alertname": "A", "instance": "gpu01:9100"}, {}, starts,
                 "0001-01-01T00:00:00Z", fingerprint)


def test_a_job_survives_a_restart_and_its_alert_stays_taken(tmp_path: Path) -> None:
    queue = AlertQueue(tmp_path)
    job = queue.offer(alert(), REQUEST)
    assert job is not None and queue.offer(alert(), REQUEST) is None  # the same alert again
    assert queue.offer(alert(starts="2026-03-01T11:00:00Z"), REQUEST) is not None  # it fired again
    queue.started(job)
    again = AlertQueue(tmp_path)  # a new process: the jobs, their attempts, the seen alerts
    pending = again.pending()
    assert [(j.id, j.attempts, j.request) for j in pending][0] == (job.id, 1, REQUEST)
    assert len(pending) == 2 and again.offer(alert(), REQUEST) is None
    again.done(pending[0])
    fresh = AlertQueue(tmp_path)
    assert [j.id for j in fresh.pending()] == [pending[1].id]
    assert fresh.offer(alert(), REQUEST) is None  # run and gone, still taken (seen.json)
    assert not [p for p in (tmp_path / "queue").iterdir() if p.name.startswith(".")]  # no temp file left


def test_a_job_written_but_not_yet_marked_seen_is_still_a_duplicate(tmp_path: Path) -> None:
    queue = AlertQueue(tmp_path)
    queue.offer(alert(), REQUEST)
    (tmp_path / "seen.json").write_text("{}")  # a crash between the two writes
    again = AlertQueue(tmp_path)
    again.pending()
    assert again.offer(alert(), REQUEST) is None


def test_the_queue_is_bounded_and_a_broken_job_file_is_set_aside(tmp_path: Path) -> None:
    queue = AlertQueue(tmp_path, limit=2)
    queue.offer(alert("f1"), REQUEST)
    queue.offer(alert("f2"), REQUEST)
    with pytest.raises(QueueFull):
        queue.offer(alert("f3"), REQUEST)
    (tmp_path / "queue" / "0-broken.json").write_text('{"id": ')
    assert len(queue.pending()) == 2
    assert (tmp_path / "queue" / "0-broken.json.bad").exists()


class Diagnosis:
    """A stand-in for `runbook run`: records the policy, answers with a one-node report."""

    def __init__(self, fail: str | None = None) -> None:
        self.fail, self.policies = fail, []  # type: ignore[var-annotated]

    def __call__(self, request: RunRequest, policy: FixPolicy) -> dict[str, Any]:
        self.policies.append(policy)
        if self.fail:
            raise DiagnosisFailed(self.fail)
        return {"schema": "runbook-report/v1", "runbook": {"id": request.runbook, "version": "1.3.0",
                                                          "digest": "sha256:0", "title": "NaN"},
                "started_at": "2026-03-01T10:15:01Z", "duration_s": 0.1, "lang": "en",
                "params": request.params, "summary": {"exit_code": 1, "by_conclusion": {}},
                "nodes": [{"node": "gpu01", "status": "concluded", "path": ["read-log"],
                           "conclusion": {"id": "loss-diverged", "severity": "critical",
                                          "title": "The loss <b>exploded</b>", "taxonomy": [],
                                          "explanation": "NaN from step 2.", "fixes": []},
                           "evidence": []}]}


def runner(tmp_path: Path, diagnose: Diagnosis) -> Runner:
    out = Answering(History(tmp_path), "en", "http://r:9095", tmp_path / "audit.jsonl")
    return Runner(diagnose, AlertQueue(tmp_path), out)


def test_a_run_is_read_only_at_most_and_leaves_report_history_and_audit(tmp_path: Path) -> None:
    diagnose = Diagnosis()
    run = runner(tmp_path, diagnose)
    job = run.queue.offer(alert(), REQUEST)
    assert job is not None
    entry = run.run(job)
    policy = diagnose.policies[0]
    assert policy.apply and policy.effects == ("read-only",) and not policy.interactive
    assert [policy.allows(e) for e in ("read-only", "changes-state", "disruptive")] == [True, False, False]
    assert policy.context["alert"] == "f1"
    assert entry["conclusions"][0]["id"] == "loss-diverged" and entry["error"] is None
    assert (tmp_path / "reports" / f"{entry['report']}.html").read_text().count("&lt;b&gt;exploded") == 1
    saved = json.loads((tmp_path / "reports" / f"{entry['report']}.json").read_text())
    assert saved["nodes"][0]["node"] == "gpu01"
    logged = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(e["event"], e["alert"], e["fixes"]) for e in logged] == [("alert-run", "f1", "read-only")]
    assert run.queue.pending() == [] and History(tmp_path).recent()[0]["job"] == job.id


def test_a_run_that_cannot_start_is_answered_and_leaves_the_queue(tmp_path: Path) -> None:
    run = runner(tmp_path, Diagnosis(fail="--set log: nan-loss has no parameter 'lg'"))
    job = run.queue.offer(alert(), RunRequest("nan-loss", ["gpu01"], None, {}, "none"))
    entry = run.run(job)  # type: ignore[arg-type]
    assert entry["error"].startswith("--set log") and entry["report"] is None
    assert not run.fix_policy(job).apply  # type: ignore[arg-type]
    assert run.queue.pending() == []


def test_workers_run_no_more_than_their_number_at_once(tmp_path: Path) -> None:
    running, most, lock, done = [0], [0], threading.Lock(), threading.Semaphore(0)

    def slow(job: object) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        done.release()

    workers = Workers(2, slow)
    workers.start()
    queue = AlertQueue(tmp_path)
    for i in range(6):
        workers.submit(queue.offer(alert(f"f{i}"), REQUEST))  # type: ignore[arg-type]
    assert all(done.acquire(timeout=5) for _ in range(6))
    workers.stop()
    assert most[0] == 2

"""Reading a Slurm job (`scontrol -o show job`, as Slurm 22.05 prints it, recorded from the test
Slurm) and the Slurm transport's answers, without a Slurm: the live paths are in
tests/e2e/test_slurm_job.py."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from runbook.run import slurm
from runbook.transports.slurm import _reassemble

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def _fake_scontrol(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    text = (DATA / name).read_text(encoding="utf-8")

    def run(argv, **_kwargs):  # type: ignore[no-untyped-def]
        if "--json" in argv:  # 22.05 has no --json for show job
            return subprocess.CompletedProcess(argv, 1, "", "scontrol: unrecognized option '--json'")
        return subprocess.CompletedProcess(argv, 0, text, "")

    monkeypatch.setattr(slurm.subprocess, "run", run)


def test_a_running_job_gives_nodes_log_and_state(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_scontrol(monkeypatch, "show-job-running.txt")
    job = slurm.read_job("1")
    assert (job.state, job.running, job.name) == ("RUNNING", True, "train-7b")
    assert job.nodes == ["node01", "node02"]
    assert job.stdout and job.stdout.endswith("/train-1.out")
    nodes = slurm.nodes_of(job, "/opt/py/bin/python3")
    assert [(n.name, n.transport, n.vars) for n in nodes] == [
        ("node01", "slurm", {"slurm_job": "1", "python": "/opt/py/bin/python3"}),
        ("node02", "slurm", {"slurm_job": "1", "python": "/opt/py/bin/python3"})]


def test_an_ended_job_is_described(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_scontrol(monkeypatch, "show-job-failed.txt")
    job = slurm.read_job("2")
    assert not job.running and job.state == "FAILED" and job.exit_code == "3:0"
    assert job.describe().startswith("job 2 (wrap) is FAILED (exit 3:0, reason NonZeroExitCode) on ")


def test_bad_and_unknown_job_ids_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(slurm.SlurmError, match="a job id is a number"):
        slurm.read_job("12; rm -rf /")

    def missing(argv, **_kwargs):  # type: ignore[no-untyped-def]
        return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")

    monkeypatch.setattr(slurm.subprocess, "run", missing)
    with pytest.raises(slurm.SlurmError) as caught:
        slurm.read_job("999")
    assert str(caught.value) == "--slurm-job 999: scontrol cannot show the job: slurm_load_jobs error: " \
                                "Invalid job id specified"


def _lines(node: str, answer: dict, width: int = 600) -> list[str]:
    text = base64.b64encode(json.dumps(answer).encode()).decode()
    parts = [text[i:i + width] for i in range(0, len(text), width)]
    return [f"RB1 {node} {i} {len(parts)} {p}" for i, p in enumerate(parts)]


def test_answers_interleaved_by_srun_are_put_back_together() -> None:
    big = {"node": "node01", "out": json.dumps({"result": {"x": "y" * 5000}}), "err": "", "rc": 0}
    small = {"node": "node02", "out": "{}", "err": "", "rc": 0}
    a, b = _lines("node01", big), _lines("node02", small)
    mixed = [a[0], b[0], *a[1:3], "srun: some noise", *a[3:]]
    got = {answer["node"]: answer for answer in _reassemble("\n".join(mixed))}
    assert got == {"node01": big, "node02": small}
    assert _reassemble("\n".join(a[:-1])) == []  # cut short: no answer rather than a broken one

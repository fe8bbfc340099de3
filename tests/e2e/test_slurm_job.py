"""`runbook run training-hang --slurm-job ID` against a real Slurm (scenarios/clusters/slurm.py): the nodes,
the log and the ranks come from the job; the checks run inside its allocation (one srun step
per round, --overlap), never over SSH; a job that ended is explained from Slurm and its log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from scenarios.clusters.net import free_port
from tests import slurm_fixture

pytestmark = pytest.mark.e2e
slurm = slurm_fixture.slurm
ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "scenarios" / "jobs" / "slurm_gloo" / "train.py"
PYTHON = sys.executable


def _submit(cluster: Any, tmp_path: Path, mode: str) -> tuple[int, Path]:
    script = (f"#!/bin/bash\nsrun {PYTHON} {TRAIN} --mode {mode} --master 127.0.0.2:{free_port()}\n")
    job = cluster.sbatch(script, "--nodes=2", "--ntasks-per-node=1", f"--output={tmp_path}/train-%j.log")
    cluster.wait_state(job, ("RUNNING",), timeout=30)
    return job, tmp_path / f"train-{job}.log"


def _wait_for(log: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # bounded: timeout / 0.2 tries
        if log.exists() and text in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    seen = log.read_text(errors="replace") if log.exists() else ""
    raise AssertionError(f"{log} never showed {text!r}: {seen}")


def _runbook(cluster: Any, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**cluster.env(), "RUNBOOK_LANG": "en"}
    return subprocess.run([PYTHON, "-m", "runbook", *args, "--python", PYTHON], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout)


def _no_probe_steps(cluster: Any, job: int) -> bool:
    listed = cluster.run("squeue", "-h", "-s", "-j", str(job), "-o", "%i %j", check=False).stdout
    return "runbook-probe" not in listed


def test_a_healthy_job_by_its_id_alone(slurm: Any, tmp_path: Path) -> None:
    job, log = _submit(slurm, tmp_path, "healthy")
    try:
        _wait_for(log, "rank 1 step 2")
        done = _runbook(slurm, "run", "training-hang", "--slurm-job", str(job), "--format", "json")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert report["params"]["log"] == str(log)
        conclusions = {n["node"]: n["conclusion"]["id"] for n in report["nodes"]}
        assert conclusions == {"node01": "healthy", "node02": "healthy"}
        rank_map = next(j for j in report["summary"]["job"] if j["analysis"] == "rank-map")
        assert rank_map["verdict"] == "complete" and rank_map["ranks"] == [0, 1]
        assert _no_probe_steps(slurm, job)
    finally:
        slurm.scancel(job)


def test_ranks_in_mismatched_collectives(slurm: Any, tmp_path: Path) -> None:
    job, log = _submit(slurm, tmp_path, "mismatch")
    try:
        _wait_for(log, "rank 1 step 2")
        time.sleep(2)
        done = _runbook(slurm, "run", "training-hang", "--slurm-job", str(job), "--set", "stall_after=1")
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
        first = done.stdout.splitlines()[0]
        assert first.startswith("✖ JOB: ") and "`barrier`" in first and "`all_reduce`" in first, first
        assert "rank 1 (node02" in first or "rank 0 (node01" in first, first
        assert "Ranks wait in different collectives" in done.stdout
        assert _no_probe_steps(slurm, job)
    finally:
        slurm.scancel(job)


def test_a_job_whose_rank_died_is_explained_from_slurm_and_its_log(slurm: Any, tmp_path: Path) -> None:
    job, log = _submit(slurm, tmp_path, "alloc-fails")
    slurm.wait_state(job, ("FAILED", "COMPLETED", "CANCELLED"), timeout=60)
    done = _runbook(slurm, "run", "training-hang", "--slurm-job", str(job), "--format", "json")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"job {job}" in done.stderr and "is FAILED" in done.stderr and "node[01-02]" in done.stderr
    triage = json.loads(done.stdout)
    assert triage["schema"] == "runbook-triage/v1" and triage["sources"][0]["file"] == str(log)
    assert triage["verdict"] in ("cause", "similar") and triage["matches"]
    assert any("Cannot allocate memory" in line["text"] or "can't allocate memory" in line["text"]
               for m in triage["matches"] for line in m["lines"]), triage["matches"][:2]


def test_ctrl_c_leaves_no_job_step_behind(slurm: Any, tmp_path: Path) -> None:
    job, log = _submit(slurm, tmp_path, "healthy")
    try:
        _wait_for(log, "rank 0 step 1")
        env = {**slurm.env(), "RUNBOOK_LANG": "en"}
        # A check that sleeps long on every node: the round's step is running when Ctrl-C comes.
        proc = subprocess.Popen([PYTHON, "-m", "runbook", "check", "command", "--slurm-job", str(job),
                                 "--with", "run=sleep 60", "--timeout", "90", "--python", PYTHON],
                                cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while _no_probe_steps(slurm, job) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _no_probe_steps(slurm, job), "the probe step never started"
        os.kill(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)
        assert proc.returncode == 130
        deadline = time.monotonic() + 15
        while not _no_probe_steps(slurm, job) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _no_probe_steps(slurm, job), slurm.run("squeue", "-s", check=False).stdout
    finally:
        slurm.scancel(job)


def test_a_job_id_that_does_not_exist_is_one_line(slurm: Any) -> None:
    done = _runbook(slurm, "run", "training-hang", "--slurm-job", "999999")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("runbook: --slurm-job 999999: ") and len(done.stderr.splitlines()) == 1

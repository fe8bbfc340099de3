"""Issue #29: an srun step whose node options cannot be satisfied, on a real Slurm
(scenarios/clusters/slurm.py: munged, slurmctld, three slurmd).

The batch script of a two-node job does what verl's ray_on_slurm example did (verl#548): it builds
`nodes_array=("$nodes")` from `scontrol show hostnames`, so the array's first element holds both
hostnames and `srun --nodes=1 --ntasks=1 -w "$head_node"` is given two hosts for a one-node step;
then it names node03, a node outside the allocation. Slurm's own srun refuses both steps
(`Requested node configuration is not available`) and the job goes on (a Ray head that never
started). `runbook run slurm-job --slurm-job ID` reads the live job and concludes step-node-options
with Slurm's error, the srun line (`set -x`) and the allocation's NodeList; `runbook triage` on the
same log names the same conclusion.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import slurm_fixture

pytestmark = pytest.mark.e2e
make_slurm = slurm_fixture.make_slurm
ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
REFUSED = "Requested node configuration is not available"

SCRIPT = """#!/bin/bash
set -x
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes_array=("$nodes")
head_node=${nodes_array[0]}
srun --nodes=1 --ntasks=1 -w "$head_node" hostname
srun --nodes=1 --ntasks=1 -w node03 hostname
set +x
echo "starting the Ray head on $head_node"
sleep 300
"""


def _wait_for(log: Path, text: str, count: int, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:  # bounded: timeout / 0.2 tries
        seen = log.read_text(errors="replace") if log.exists() else ""
        if seen.count(text) >= count:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"{log} never showed {text!r} {count} times: {seen}")


def _runbook(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**cluster.env(), "RUNBOOK_LANG": "en"}
    return subprocess.run([PYTHON, "-m", "runbook", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def test_a_one_node_step_given_two_hosts_and_one_outside(make_slurm: Any, tmp_path: Path) -> None:
    cluster = make_slurm(3)
    job = cluster.sbatch(SCRIPT, "--nodes=2", "--ntasks-per-node=1", "--nodelist=node01,node02",
                         f"--output={tmp_path}/ray-%j.log")
    log = tmp_path / f"ray-{job}.log"
    try:
        text = _wait_for(log, REFUSED, 2)
        _wait_for(log, "starting the Ray head", 1)
        # Slurm's real answers, and no step ran: the job holds node01 and node02 only.
        assert f"srun: error: Unable to create step for job {job}: {REFUSED}" in text
        assert "-w 'node01\nnode02'" in text and "+ srun --nodes=1 --ntasks=1 -w node03 hostname" in text
        assert cluster.job(job)["NodeList"] == "node[01-02]"

        done = _runbook(cluster, "run", "slurm-job", "--slurm-job", str(job), "--python", PYTHON,
                        "--format", "json")
        assert done.stdout, done.stderr[-3000:]
        report = json.loads(done.stdout)
        nodes = {n["node"]: n for n in report["nodes"]}
        assert set(nodes) == {"node01", "node02"}
        for node in nodes.values():
            assert node["conclusion"]["id"] == "step-node-options", node["evidence"]
            assert [e["step"] for e in node["evidence"]] == ["read-log", "job-state"]
            finding = node["finding"]
            assert f"srun: error: Unable to create step for job {job}: {REFUSED}" in finding
            assert "the srun line: + srun --nodes=1 --ntasks=1 -w node03 hostname" in finding
            assert "the job's allocation: NodeList=node[01-02], NumNodes=2" in finding, finding

        triaged = _runbook(cluster, "triage", str(log), "--format", "json")
        verdict = json.loads(triaged.stdout)
        first = verdict["matches"][0]
        assert (first["runbook"], first["conclusion"]["id"]) == ("slurm-job", "step-node-options")
    finally:
        cluster.scancel(job)

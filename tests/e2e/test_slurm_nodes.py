"""`--slurm-nodes HOSTLIST` and `runbook collect --slurm-job ID` against a real Slurm
(scenarios/clusters/slurm.py): idle nodes are held for the run in one `runbook-health` allocation
(salloc --no-shell), checked through it (srun --overlap steps, no SSH) and given back at the
end, on Ctrl-C too; a drained node is named in one line; collect gathers a running job's nodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests import slurm_fixture

pytestmark = pytest.mark.e2e
slurm = slurm_fixture.slurm
ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
BOTH = {"node01": "idle", "node02": "idle"}


_until = slurm_fixture.until


def _env(cluster: Any) -> dict[str, str]:
    return {**cluster.env(), "RUNBOOK_LANG": "en"}


def _runbook(cluster: Any, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "runbook", *args, "--python", PYTHON], capture_output=True,
                          text=True, env=_env(cluster), cwd=ROOT, timeout=timeout)


def _health_jobs(cluster: Any, all_states: bool = False) -> list[str]:
    """`ID STATE` of the runbook-health jobs squeue lists (by default: the live ones)."""
    argv = ["squeue", "-h", "-n", "runbook-health", "-o", "%i %T"] + (["-t", "all"] if all_states else [])
    return cluster.run(*argv).stdout.split("\n")[:-1]


def _none_left(cluster: Any) -> None:
    _until(lambda: _health_jobs(cluster) == [], 15, "every runbook-health job gone from squeue")
    _until(lambda: cluster.sinfo() == BOTH, 15, "both nodes idle again")


@pytest.fixture(autouse=True)
def _idle_nodes(slurm: Any) -> Any:
    """Each test starts (and leaves) both nodes idle, with no allocation of ours."""
    _until(lambda: slurm.sinfo() == BOTH, 30, "both nodes idle")
    yield
    for line in _health_jobs(slurm):
        slurm.run("scancel", line.split()[0], check=False)


def test_idle_nodes_are_diagnosed_in_an_allocation_that_is_given_back(slurm: Any) -> None:
    before = {line.split()[0] for line in _health_jobs(slurm, all_states=True)}
    done = _runbook(slurm, "run", "gpu-hardware", "--slurm-nodes", "node[01-02]", "--format", "json")
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    status = {n["node"]: n["status"] for n in report["nodes"]}
    assert status == {"node01": "concluded", "node02": "concluded"}, report["summary"]
    assert all(n["conclusion"]["id"] for n in report["nodes"])
    # it did run in an allocation of its own, and that allocation is over
    ours = [line for line in _health_jobs(slurm, all_states=True) if line.split()[0] not in before]
    assert len(ours) == 1 and ours[0].split()[1] in ("CANCELLED", "COMPLETING"), ours
    _none_left(slurm)


def test_a_check_by_slurm_nodes(slurm: Any) -> None:
    done = _runbook(slurm, "check", "command", "--slurm-nodes", "node[01-02]", "--with",
                    "run=hostname", "--format", "json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    answers = {a["node"]: a["result"]["stdout"].strip() for a in json.loads(done.stdout)["nodes"]}
    assert answers == {"node01": "node01", "node02": "node02"}  # each ran on its own node
    _none_left(slurm)


def test_ctrl_c_gives_the_allocation_back(slurm: Any) -> None:
    proc = subprocess.Popen([PYTHON, "-m", "runbook", "check", "command", "--slurm-nodes", "node[01-02]",
                             "--with", "run=sleep 60", "--timeout", "90", "--python", PYTHON],
                            cwd=ROOT, env=_env(slurm), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        # the allocation runs and the round's probe step is in it when Ctrl-C comes
        _until(lambda: "runbook-probe" in slurm.run("squeue", "-h", "-s", "-o", "%j").stdout, 30,
               "a probe step running in the runbook-health allocation")
        assert [line.split()[1] for line in _health_jobs(slurm)] == ["RUNNING"]
        os.kill(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    _none_left(slurm)
    assert slurm.steps() == []


def test_a_drained_node_is_named_in_one_line(slurm: Any) -> None:
    slurm.run("scontrol", "update", "NodeName=node02", "State=DRAIN", "Reason=test")
    try:
        _until(lambda: slurm.sinfo().get("node02") == "drained", 15, "node02 drained")
        done = _runbook(slurm, "check", "process", "--slurm-nodes", "node[01-02]", timeout=60)
    finally:
        slurm.run("scontrol", "update", "NodeName=node02", "State=RESUME")
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "node02 is drained (Reason: test)" in done.stderr and "node01" not in done.stderr.split(":", 2)[2]
    assert _health_jobs(slurm) == []  # nothing was asked for


def test_slurm_nodes_with_nodes_is_refused(slurm: Any) -> None:
    done = _runbook(slurm, "check", "process", "--slurm-nodes", "node[01-02]", "--nodes", "node01")
    assert done.returncode == 2
    assert done.stderr.strip() == "runbook check: --slurm-nodes names the nodes: drop --nodes"


def test_collect_by_job_id_gathers_the_jobs_nodes(slurm: Any, tmp_path: Path) -> None:
    job = slurm.sbatch("", "--nodes=2", "--ntasks-per-node=1", "--job-name=sleeper",
                       f"--output={tmp_path}/sleeper-%j.out", "--wrap=echo started; srun sleep 300")
    try:
        slurm.wait_state(job, "RUNNING", timeout=30)
        _until(lambda: f"{job}.0" in slurm.steps(job), 15, "step 0 (srun sleep 300) listed")
        bundle = tmp_path / "bundle.tar.gz"
        done = _runbook(slurm, "collect", "--slurm-job", str(job), "-o", str(bundle), "--timeout", "60")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        with tarfile.open(bundle) as tar:
            index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
            log = tar.extractfile("node01/log.txt").read().decode()  # type: ignore[union-attr]
        assert [n["node"] for n in index["nodes"]] == ["node01", "node02"]
        assert all(n["status"] == "complete" for n in index["nodes"]), index["nodes"]
        # the job's StdOut is the default log, as with `runbook run --slurm-job`
        assert index["params"]["log"] == f"{tmp_path}/sleeper-{job}.out"
        assert "started" in log
        steps = slurm.run("squeue", "-h", "-s", "-j", str(job), "-o", "%j").stdout
        assert "runbook-probe" not in steps, steps
    finally:
        slurm.scancel(job)

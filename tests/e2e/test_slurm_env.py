"""The real Slurm of scenarios/clusters/slurm.py works: munged, slurmctld and two slurmd on this machine.

What a Slurm runbook can count on here (Slurm 22.05): sinfo, sbatch, srun (in a batch script,
and `srun --jobid ID --overlap` into a running job), `scontrol -o show job` (22.05's scontrol
has no --json; `squeue --json` has), `squeue -s`, scancel. Not sacct: there is no slurmdbd.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import slurm_fixture

pytestmark = pytest.mark.e2e
slurm = slurm_fixture.slurm
make_slurm = slurm_fixture.make_slurm

ROOT = Path(__file__).resolve().parents[2]
BOTH = ["node01", "node02"]


_until = slurm_fixture.until


def _sleeps(sl, *seconds: str) -> list[int]:
    """Pids of the `sleep SECONDS` processes on the nodes (not the sruns that started them)."""
    return [pid for name in sl.names() for pid, cmd in sl.node_processes(name)
            if cmd.split()[:1] and cmd.split()[0].rsplit("/", 1)[-1] == "sleep"
            and cmd.split()[1:] in ([s] for s in seconds)]


def test_sinfo_shows_both_nodes_idle(slurm):
    assert slurm.startup_s < 15
    assert slurm.sinfo() == {"node01": "idle", "node02": "idle"}
    out = slurm.run("sinfo").stdout
    assert "debug*" in out and "idle" in out and "node[01-02]" in out, out


def test_batch_job_runs_a_task_on_each_node(slurm):
    out = slurm.jobs_dir / "both-%j.out"
    job = slurm.sbatch('#!/bin/bash\nsrun bash -c \'echo "$SLURMD_NODENAME $(hostname) $SLURM_PROCID"\'\n',
                       "--nodes=2", "--ntasks-per-node=1", "-o", str(out), "--job-name=both")
    assert slurm.wait_state(job, "COMPLETED", timeout=30) == "COMPLETED"

    info = slurm.job(job)  # scontrol -o show job ID
    assert info["JobState"] == "COMPLETED"
    assert info["NodeList"] == "node[01-02]"
    assert info["StdOut"] == str(out).replace("%j", str(job))
    assert info["ExitCode"] == "0:0"
    assert info["JobName"] == "both"
    # each task ran on its own node, whose hostname (its UTS namespace) is the node's name
    lines = sorted(slurm.output(job).split("\n"))
    assert [line for line in lines if line] == ["node01 node01 0", "node02 node02 1"], lines

    # squeue --json (22.05 has it; scontrol does not) still lists it: MinJobAge is a day
    listed = {j["job_id"]: j for j in slurm.squeue(all_states=True)}
    state = listed[job]["job_state"]  # "COMPLETED" in 22.05, ["COMPLETED"] from 23.02 on
    assert (state if isinstance(state, str) else state[0]) == "COMPLETED"
    assert listed[job]["nodes"] == "node[01-02]"


def test_srun_overlap_into_a_running_job_then_scancel(slurm):
    job = slurm.sbatch("", "--nodes=2", "--ntasks-per-node=1", "--job-name=sleeper",
                       "--wrap=srun sleep 300")
    slurm.wait_state(job, "RUNNING", timeout=30)
    _until(lambda: f"{job}.0" in slurm.steps(job), 15, "step 0 (srun sleep 300) listed")
    _until(lambda: len(_sleeps(slurm, "300")) == 2, 15, "a sleep on each node")

    # the job's CPUs are all taken by step 0: a second step needs --overlap
    res = slurm.run("srun", "--jobid", str(job), "--overlap", "--nodes", "2",
                    "--ntasks-per-node", "1", "bash", "-c",
                    'echo "$SLURMD_NODENAME $SLURM_JOB_ID $SLURM_STEP_ID"', timeout=30)
    assert sorted(res.stdout.strip().splitlines()) == [f"node01 {job} 1", f"node02 {job} 1"], res
    # that step is over: only the batch step and step 0 are left
    _until(lambda: sorted(slurm.steps(job)) == sorted([f"{job}.batch", f"{job}.0"]), 10,
           "only the batch step and step 0 in squeue -s")

    slurm.scancel(job)
    assert slurm.wait_state(job, "CANCELLED", timeout=30) == "CANCELLED"
    _until(lambda: slurm.steps(job) == [], 15, "no step left in squeue -s")
    _until(lambda: _sleeps(slurm, "300") == [], 15, "no sleep left on the nodes")
    _until(lambda: slurm.sinfo() == {"node01": "idle", "node02": "idle"}, 15, "both nodes idle")


def test_sacct_needs_slurmdbd_which_is_absent(slurm):
    job = slurm.sbatch("", "--wrap=true")
    slurm.wait_state(job, "COMPLETED", timeout=30)
    res = slurm.run("sacct", "-j", str(job), check=False)
    assert res.returncode != 0
    assert "accounting storage is disabled" in res.stderr


def test_stop_kills_every_daemon_and_job_process(make_slurm):
    sl = make_slurm(1)
    # one job process escapes its step (setsid, re-parented): it must die with the node too
    job = sl.sbatch("#!/bin/bash\n(setsid sleep 1001 &)\nsrun sleep 1002\n", "--job-name=stuck")
    sl.wait_state(job, "RUNNING", timeout=30)
    _until(lambda: len(_sleeps(sl, "1001", "1002")) == 2, 15, "both sleeps running")
    pids = sl.pids()
    assert len(pids) >= 8  # munged, 2 unshares, 2 shells, slurmctld, slurmd, stepds, sleeps
    assert sl.stop() is True
    assert sl.pids() == []
    alive = [p for p in pids if Path(f"/proc/{p}").exists()
             and Path(f"/proc/{p}/stat").read_text().split(") ")[-1][:1] not in "ZX"]
    assert alive == []


def test_cli_up_and_sigterm(tmp_path):
    slurm_fixture.SLURM.require()
    proc = subprocess.Popen([sys.executable, "-m", "scenarios.clusters.slurm", "up", "1", "--dir",
                             str(tmp_path / "s")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        state = json.loads(proc.stdout.readline())  # printed once every node is idle
        env = {"SLURM_CONF": state["slurm_conf"], "PATH": "/usr/bin:/bin"}
        out = subprocess.run(["sinfo", "-h", "-o", "%T %N"], env=env, capture_output=True,
                             text=True, timeout=30)
        assert out.stdout.split() == ["idle", "node01"], out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0
    daemons = [state["munged_pid"], state["slurmctld"]["unshare_pid"],
               *[n["unshare_pid"] for n in state["nodes"]]]
    assert [p for p in daemons if Path(f"/proc/{p}/cmdline").exists()
            and state["base"] in Path(f"/proc/{p}/cmdline").read_text()] == []

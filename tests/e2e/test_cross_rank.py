"""Failures only visible across ranks: real 4-rank gloo jobs, one rank per host of a fake cluster.

Each scenario (scenarios/jobs/gloo_*) is one rank of a real torch.distributed job on CPU; rank R
runs on node0{R+1} with RANK=R WORLD_SIZE=4 MASTER_ADDR=<node01's address>, as a multi-node
launcher starts them. Looked at one host at a time every rank seems fine (it waits in a
collective, or polls, or sleeps); only the job-level analyses of `runbook run training-hang`
(rank-map, stack-groups, flight-recorder, drift) see which rank or host is the odd one.

Every host gets the same job directory path (`JOB_DIR`), bind-mounted inside the host's own
mount namespace onto its private folder BASE/jobs/nodeNN, as on a real cluster where each
node has its own local disk at the same path: the log (`log=`), scenario.json and the
flight-recorder prefix (`TORCH_FR_DUMP_TEMP_FILE=JOB_DIR/fr_rank_`) have one path on every
host, so one `--set log=...` serves all hosts, and the ranks' settings (which the drift
analysis compares) differ only where the scenario makes them differ.

The hosts' python3 is this interpreter's (torch, and py-spy beside it, for the `stack` check).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scenarios.clusters.net import free_port
from scenarios.clusters.ssh import SYSTEM_PATH, Cluster
from tests import cluster_fixture

pytestmark = pytest.mark.e2e
make_cluster = cluster_fixture.make_cluster
pytest.importorskip("torch")

HOSTS = ("node01", "node02", "node03", "node04")
NODES = ",".join(HOSTS)
WORLD_SIZE = 4
SPEED = 4.0
STALL_AFTER_S = 2.0
FR_DONE = r"flight recorder dumped to"


class CrossRankJob:
    """One scenario's ranks on a 4-host cluster, rank R on HOSTS[R], each in its own host's
    JOB_DIR (see the module docstring)."""

    def __init__(self, cl: Cluster, base: Path, name: str) -> None:
        self.cl, self.name = cl, name
        self.job_dir = base / "job"  # the path every host sees; its content is the host's own
        self.job_dir.mkdir(parents=True, exist_ok=True)
        self.private = {host: base / "jobs" / host for host in HOSTS}
        for host, folder in self.private.items():
            folder.mkdir(parents=True, exist_ok=True)
            res = cl.run_in(host, ["mount", "--bind", str(folder), str(self.job_dir)],
                            env={"PATH": SYSTEM_PATH})
            assert res.returncode == 0, f"{host}: bind mount failed: {res.stderr}"
        self.port = free_port([h.address for h in cl.hosts] + ["127.0.0.1"])
        self.started: list[str] = []

    @property
    def log_param(self) -> str:
        return str(self.job_dir / "train.log")

    def log(self, host: str) -> Path:
        """A host's log as this machine sees it."""
        return self.private[host] / "train.log"

    def rank_env(self, rank: int) -> dict[str, str]:
        return {"RANK": str(rank), "LOCAL_RANK": "0", "GROUP_RANK": str(rank),
                "WORLD_SIZE": str(WORLD_SIZE), "LOCAL_WORLD_SIZE": "1",
                "MASTER_ADDR": self.cl.host(HOSTS[0]).address, "MASTER_PORT": str(self.port),
                "TORCH_FR_BUFFER_SIZE": "2000",
                "TORCH_FR_DUMP_TEMP_FILE": str(self.job_dir / "fr_rank_")}

    def start(self, ranks: tuple[int, ...] = (0, 1, 2, 3),
              extra_env: dict[int, dict[str, str]] | None = None) -> None:
        for rank in ranks:
            host = HOSTS[rank]
            env = {**self.rank_env(rank), **(extra_env or {}).get(rank, {})}
            self.cl.start_scenario(host, self.name, str(self.job_dir), speed=SPEED, env=env)
            self.started.append(host)

    def wait_for(self, host: str, pattern: str, timeout: float = 45.0) -> None:
        """Wait (bounded) until a host's log matches `pattern`."""
        regex = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if regex.search(self.read(host)):
                return
            time.sleep(0.2)
        raise AssertionError(f"{host}: /{pattern}/ not in its log within {timeout:g}s:\n"
                             f"{self.read(host)[-2000:]}")

    def read(self, host: str) -> str:
        try:
            return self.log(host).read_text(errors="replace")
        except OSError:
            return ""

    def wait_quiet(self, quiet_s: float = STALL_AFTER_S + 0.5, timeout: float = 20.0) -> None:
        """Wait (bounded) until no started host's log was written for `quiet_s` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            newest = max(self.log(h).stat().st_mtime for h in self.started)
            if time.time() - newest >= quiet_s:
                return
            time.sleep(0.2)
        raise AssertionError(f"the logs kept moving for {timeout:g}s")

    def training_processes(self, host: str) -> list[str]:
        return [p for p in self.cl.processes(host) if f"{self.name}/train.py" in p]

    def stop(self) -> None:
        """`python3 -m scenarios stop` on every host that runs a rank; nothing may be left."""
        for host in self.started:
            res = self.cl.stop_scenario(host, str(self.job_dir))
            assert res.returncode == 0, f"{host}: stop failed: {res.stderr}"
        for host in self.started:
            assert not self.training_processes(host), f"{host} still runs {self.training_processes(host)}"
        self.started.clear()

    def runbook(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**self.cl.env(), "RUNBOOK_LANG": "en"}
        return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True,
                              text=True, env=env, timeout=timeout)

    def diagnose(self, fmt: str) -> subprocess.CompletedProcess[str]:
        """The job diagnosed; with RUNBOOK_RECORD_DIR set, the JSON run is recorded into
        RUNBOOK_RECORD_DIR/<scenario> (how runbooks/recordings/gloo_* are made)."""
        record = os.environ.get("RUNBOOK_RECORD_DIR")
        extra = ("--record", str(Path(record) / self.name)) if record and fmt == "json" else ()
        return self.runbook("run", "training-hang", "--nodes", NODES,
                            "--set", f"match={self.name}/train.py", "--set", f"log={self.log_param}",
                            "--set", f"stall_after={STALL_AFTER_S:g}", "--format", fmt, *extra)


@pytest.fixture
def cross_rank(make_cluster: Callable[..., Cluster],
               tmp_path: Path) -> Iterator[Callable[[str], CrossRankJob]]:
    """cross_rank(name) -> a CrossRankJob on a fresh 4-host cluster; its ranks are stopped at
    teardown (and the stop itself is checked: no rank process may be left)."""
    made: list[CrossRankJob] = []

    def make(name: str) -> CrossRankJob:
        cl = make_cluster(4, python_dir=str(Path(sys.executable).parent))
        made.append(CrossRankJob(cl, tmp_path, name))
        return made[-1]

    yield make
    for job in made:
        job.stop()


def job_verdicts(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(report["summary"].get("job") or [])


def assert_diagnosed(job: CrossRankJob, verdict: str, rank: int, host: str) -> dict[str, Any]:
    """JSON: exit 1, summary.job holds the verdict naming the suspect; text: exit 1, its first
    line names the suspect's rank and host."""
    out = job.diagnose("json")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr
    report = json.loads(out.stdout)
    entries = [j for j in job_verdicts(report) if j.get("verdict") == verdict]
    assert entries, f"no job verdict {verdict!r}: {job_verdicts(report)}"
    entry = entries[0]
    assert entry["problem"] is True, entry
    assert host in entry["hosts"] or host in entry["suspects"], entry
    if entry["analysis"] != "drift":  # drift compares hosts: its result names no rank
        assert rank in entry["ranks"], entry
    text = job.diagnose("text")
    assert text.returncode == 1, text.stdout + text.stderr
    first = text.stdout.splitlines()[0] if text.stdout else ""
    assert host in first, f"first line does not name {host}: {first!r}\n{text.stdout}"
    assert f"rank {rank}" in first, f"first line does not name rank {rank}: {first!r}\n{text.stdout}"
    return entry


def test_async_mismatch_found_by_the_flight_recorder(cross_rank) -> None:
    job = cross_rank("gloo_async_mismatch")
    job.start()
    for host in HOSTS:
        job.wait_for(host, FR_DONE)
    job.wait_quiet()
    entry = assert_diagnosed(job, "mismatch", rank=3, host="node04")
    assert entry["analysis"] == "flight-recorder"
    assert "broadcast" in entry["finding"] and "all_gather" in entry["finding"], entry


def test_rank_outside_any_collective_found_by_stack_groups(cross_rank) -> None:
    job = cross_rank("gloo_rank_outside")
    job.start()
    for host in HOSTS:
        job.wait_for(host, FR_DONE)
    job.wait_quiet()
    entry = assert_diagnosed(job, "odd-ranks", rank=2, host="node03")
    assert entry["analysis"] == "stack-groups"
    assert re.search(r"save_shard.*train\.py:\d+", entry["finding"]), entry
    assert "all_reduce" in entry["finding"], entry


def test_rank_one_collective_behind_found_by_the_flight_recorder(cross_rank) -> None:
    job = cross_rank("gloo_rank_behind")
    job.start()
    for host in HOSTS:
        job.wait_for(host, FR_DONE)
    job.wait_quiet()
    entry = assert_diagnosed(job, "behind", rank=2, host="node03")
    assert entry["analysis"] == "flight-recorder"
    assert "one collective behind" in entry["finding"], entry


def test_missing_rank_found_by_the_rank_map(cross_rank) -> None:
    job = cross_rank("gloo_missing_rank")
    job.start(ranks=(0, 1, 3))  # node03 runs nothing
    for host in ("node01", "node02", "node04"):
        job.wait_for(host, r"init_process_group\(backend=gloo")
    job.wait_quiet()
    assert not job.training_processes("node03")
    entry = assert_diagnosed(job, "missing-ranks", rank=2, host="node03")
    assert entry["analysis"] == "rank-map"
    nodes = {n["node"]: n for n in json.loads(job.diagnose("json").stdout)["nodes"]}
    assert nodes["node03"]["conclusion"]["id"] == "rank-missing-here"
    for host in ("node01", "node02", "node04"):  # their own evidence first: stalled, in the rendezvous
        assert nodes[host]["conclusion"]["id"] == "waiting-for-missing-ranks", nodes[host]["path"]
        assert nodes[host]["path"][-1] == "stack-dump"


def test_nccl_settings_drift_found_by_drift(cross_rank) -> None:
    job = cross_rank("gloo_nccl_drift")
    same = {"NCCL_SOCKET_IFNAME": "lo"}
    job.start(extra_env={0: same, 1: {"NCCL_SOCKET_IFNAME": "eth9", "NCCL_IB_DISABLE": "1"},
                         2: same, 3: same})
    for host in HOSTS:
        job.wait_for(host, FR_DONE)
    job.wait_quiet()
    out = job.diagnose("json")
    entry = next((j for j in job_verdicts(json.loads(out.stdout)) if j.get("verdict") == "differs"), None)
    assert entry is not None and entry["analysis"] == "drift", out.stdout[-3000:]
    assert "NCCL_IB_DISABLE" in entry["finding"] and "NCCL_SOCKET_IFNAME" in entry["finding"], entry
    assert entry["hosts"] == ["node02"], entry
    # node02 runs rank 1: the first line should say so (the drift finding names hosts only).
    assert_diagnosed(job, "differs", rank=1, host="node02")

"""`runbook run training-hang` against real faulty jobs from scenarios/, on this machine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios.jobs import Scenario

pytestmark = pytest.mark.e2e
GPU_TIMEOUT_S = 8.0  # training-hang's gpu steps


def diagnose(scenario: Scenario, *sets: str, auto: bool = False,
             extra_env: dict[str, str] | None = None) -> tuple[int, dict, float]:
    args = ["run", "training-hang", "--set", f"log={scenario.log}", "--format", "json", *sets]
    if not auto:
        args += ["--set", f"pid={scenario.pid}"]
    env = {**scenario.tool_env(), "RUNBOOK_LANG": "en", **(extra_env or {})}
    begin = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                         env=env, timeout=120)
    elapsed = time.monotonic() - begin
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout), elapsed


def wait_quiet(log: Path, quiet_s: float, timeout: float) -> bool:
    """Wait (bounded) until `log` has not been written for `quiet_s` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if time.time() - log.stat().st_mtime >= quiet_s:
            return True
        time.sleep(0.25)
    return False




def test_seed_000_loader_still_tokenising(scenario) -> None:
    job = scenario("loader_accumulating")
    assert job.wait_for_log(r"Token buffer:", timeout=20)
    code, report, _ = diagnose(job)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "dataloader-accumulating", node
    assert node["conclusion"]["taxonomy"] == ["hang.dataloader"]
    assert code == 0  # severity info: waiting is the normal course
    process = node["evidence"][0]["result"]
    # busy tokenising, not idle: on a loaded 2-core machine it gets a fraction of a core (20.0 seen)
    assert process["found"] and process["pid"] == job.pid and process["cpu_percent"] >= 5
    loader = node["evidence"][1]["result"]["patterns"]["loader_progress"]
    assert loader["count"] >= 1 and loader["last_groups"][1] == "65537"


def test_seed_000_found_without_a_pid(scenario) -> None:
    job = scenario("loader_accumulating")
    assert job.wait_for_log(r"Token buffer:", timeout=20)
    _, report, _ = diagnose(job, "--set", "match=loader_accumulating", auto=True)
    assert report["nodes"][0]["conclusion"]["taxonomy"] == ["hang.dataloader"]


def test_seed_001_nvidia_smi_hangs(scenario) -> None:
    job = scenario("nvidia_smi_hang")
    assert job.wait_for_log(r"Collecting trajectories", timeout=20)
    time.sleep(2.5)  # let the log go quiet for longer than stall_after
    code, report, elapsed = diagnose(job, "--set", "stall_after=2")
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "gpu-driver-hang", node
    assert node["conclusion"]["taxonomy"] == ["hang.gpu-driver"]
    assert code == 1
    gpu = node["evidence"][-1]
    assert gpu["check"] == "gpu" and gpu["result"]["timed_out"] is True
    # A hanging check ends within its timeout plus a second, and nothing else holds the run: the
    # slack is the runbook process's own start and other steps on a loaded CI machine (14.3 s
    # once against the earlier bound of 14), far below a run the hang would hold.
    assert gpu["duration_s"] <= GPU_TIMEOUT_S + 1.0
    assert elapsed < 3 * GPU_TIMEOUT_S
    assert not _processes_mentioning(f"{job.workdir}/", b"nvidia-smi")


def test_healthy_job(scenario) -> None:
    job = scenario("healthy")
    assert job.wait_for_log(r"(?s)step \d+ \|.*step \d+ \|", timeout=20)
    code, report, _ = diagnose(job)
    node = report["nodes"][0]
    assert (node["conclusion"]["id"], node["conclusion"]["severity"], code) == ("healthy", "ok", 0)
    assert node["conclusion"]["taxonomy"] == []


def test_the_job_gone_after_stop_is_no_training_process(scenario) -> None:
    job = scenario("healthy")
    assert job.wait_for_log(r"step \d+ \|", timeout=20)
    job.stop()
    code, report, _ = diagnose(job)
    assert report["nodes"][0]["conclusion"]["id"] == "no-training-process"
    assert code == 0


def _processes_mentioning(path: str, word: bytes) -> list[int]:
    """PIDs whose command line holds both `path` and `word`: leftovers of this scenario."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if path.encode() in cmdline and word in cmdline:
                found.append(int(entry))
    return found


def test_seed_002_ranks_deadlocked_in_mismatched_collectives(scenario) -> None:
    pytest.importorskip("torch")
    job = scenario("ddp_mismatch", speed=4)
    assert job.wait_for_log(r"(?s)entering.*entering", timeout=60)
    time.sleep(2.5)
    code, report, _ = diagnose(job, "--set", "stall_after=2", "--set", "match=ddp_mismatch",
                               auto=True)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "collective-mismatch", node
    assert node["conclusion"]["taxonomy"] == ["hang.collective"]
    assert code == 1
    stack = node["evidence"][-1]
    assert stack["check"] == "stack"
    ops = {r["op"] for r in stack["result"]["ranks"].values()}
    assert ops == {"all_reduce", "barrier"}
    assert stack["decided_by"]["result.odd_ranks"]  # the report names the mismatched rank
    frames = [r["user_frame"] for r in stack["result"]["ranks"].values()]
    assert all("ddp_mismatch/train.py" in f for f in frames)
    # The same evidence ad hoc: `runbook check stack` names each rank's collective.
    out = subprocess.run([sys.executable, "-m", "runbook", "check", "stack", "--with",
                          "match=ddp_mismatch", "--format", "json"], capture_output=True,
                         text=True, timeout=120)
    ranks = json.loads(out.stdout)["nodes"][0]["result"]["ranks"]
    assert {rank: r["op"] for rank, r in ranks.items()} == {"0": "all_reduce", "1": "barrier"}


@pytest.mark.parametrize(("name", "conclusion", "taxonomy"), [
    ("ray_actor_init_hang", "ray-workers-initialising", "hang.ray-init"),
    ("ray_collect_hang", "ray-collect-stuck", "hang.ray-collect"),
])
def test_seed_001_ray_hangs(scenario, name: str, conclusion: str, taxonomy: str) -> None:
    pytest.importorskip("ray")
    job = scenario(name)
    assert job.wait_for_log(r"Collecting trajectories", timeout=120)
    # Ray may still print start-up lines: diagnose once the log has really gone quiet.
    assert wait_quiet(job.log, quiet_s=4.0, timeout=90)
    # Point Ray tools at this job's cluster, as a user would: an earlier test's cluster may
    # still be shutting down on this machine.
    address = re.search(r"Ray cluster started: address=(\S+),", job.read_log())
    assert address, job.read_log()[-2000:]
    for _attempt in range(3):  # Ray writes a late warning now and then: the log moved again
        code, report, _ = diagnose(job, "--set", "stall_after=3", "--set", "ray_pending_after=2",
                                   "--set", f"match={name}/train.py", auto=True,
                                   extra_env={"RAY_ADDRESS": address.group(1)})
        node = report["nodes"][0]
        if node["path"][-1:] != ["read-log"] or node["conclusion"]["id"] != "healthy":
            break
        assert wait_quiet(job.log, quiet_s=4.0, timeout=90)
    assert node["conclusion"]["id"] == conclusion, [
        (e["step"], e["goto"], e["decided_by"]) for e in node["evidence"]]
    assert node["conclusion"]["taxonomy"] == [taxonomy]
    assert node["path"][-2:] == ["stack-dump", "ray-state"]
    assert code == 1

"""`runbook` against real failed DDP launches from scenarios/ (seed 002), on this machine.

master_port_taken: `runbook triage` on the job's log picks ddp-errors, which reads the port from
torch's EADDRINUSE error and names the leftover process still listening on it.
world_size_exceeds_devices: ddp-errors, pointed at a waiting rank, compares its LOCAL_WORLD_SIZE
with the devices its CUDA_VISIBLE_DEVICES lists.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runbook.checks.host.port import listening_sockets
from scenarios.jobs import group_members

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                                   reason="the scenarios need torch")]

START_TIMEOUT_S = 180.0  # two or three torch imports on a busy 2-core machine
RUN_TIMEOUT_S = 300.0


def run_runbook(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m runbook ARGS` as a user runs it (no MASTER_* of this shell: loopback only)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    env["RUNBOOK_LANG"] = "en"
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                          env=env, timeout=RUN_TIMEOUT_S)


def run_json(*args: str) -> tuple[int, dict]:
    out = run_runbook(*args, "--format", "json")
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def evidence(node: dict, step: str) -> dict:
    found = [e for e in node["evidence"] if e["step"] == step]
    assert found, [e["step"] for e in node["evidence"]]
    return found[-1]


def wait_for(predicate, timeout: float) -> bool:
    """Poll `predicate` every 0.1 s until it holds or `timeout` seconds pass (bounded)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def exit_status(pid: int) -> int | None:
    """A child's exit status once it has exited (-N: killed by signal N), None while it runs.

    WNOWAIT leaves it unreaped: the Popen inside the Scenario still owns it.
    """
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _state(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()[0]




def test_master_port_taken_names_the_process_holding_it(scenario) -> None:
    job = scenario("master_port_taken", speed=4.0)
    assert job.wait_for_log(r"\[launcher\] job failed \(exit status \d+\)", timeout=START_TIMEOUT_S), \
        job.read_log()
    log = job.read_log()
    port = int(re.search(r"MASTER_PORT=(\d+)", log).group(1))
    assert re.search(rf"DistNetworkError: .*(?:port: {port}\b.*EADDRINUSE|:{port} \(errno: 98)", log), log
    assert "[launcher] job failed (exit status 1)" in log
    assert wait_for(lambda: exit_status(job.pid) is not None, timeout=30)
    assert exit_status(job.pid) == 1  # the job failed...
    previous = (job.workdir / "previous_run.log").read_text()
    holder_port, holder = map(int, re.findall(
        r"rendezvous store up on \S+:(\d+) \(pid (\d+)\)", previous)[-1])
    assert holder_port == port and _state(holder) in ("S", "R")  # ...the leftover still runs...
    assert listening_sockets(port)  # ...and listens on MASTER_PORT

    # What a user runs first: triage the log; it names ddp-errors and the port-in-use entry.
    out = run_runbook("triage", str(job.log), "--format", "json")
    top = json.loads(out.stdout)["matches"][0]
    assert (top["runbook"], top["taxonomy"]) == ("ddp-errors", ["launch.port-in-use"]), top
    code, report = run_json("run", top["runbook"], "--set", f"log={job.log}")
    node = report["nodes"][0]
    conclusion = node["conclusion"]
    assert conclusion["id"] == "port-in-use", [(e["step"], e["goto"], e["decided_by"])
                                               for e in node["evidence"]]
    assert conclusion["taxonomy"] == ["launch.port-in-use"]
    assert node["path"] == ["read-logs", "port-holder"]
    assert code == 1
    # The evidence: torch's error line with the port, and who holds that port now.
    bind = evidence(node, "read-logs")["result"]["patterns"]["bind_port"]
    assert bind["last_groups"] == [str(port)] and "EADDRINUSE" in bind["last_line"]
    holder_step = evidence(node, "port-holder")
    bound = holder_step["result"]["port_bound"]
    assert bound["port"] == port and bound["bound"] is True
    assert bound["pids"] == [holder]
    assert "master_port_taken/train.py --previous-run" in bound["cmdlines"][0]
    assert holder_step["decided_by"]["result.port_bound.pids"] == [holder]
    commands = [fix["run"] for fix in conclusion["fixes"] if fix.get("run")]
    assert f"kill {holder}" in commands
    assert any(f"-p {holder}" in c for c in commands)

    assert job.stop()
    assert not group_members(job.pgid) and not listening_sockets(port)


def test_world_size_larger_than_the_devices(scenario) -> None:
    job = scenario("world_size_exceeds_devices", speed=4.0)
    assert job.wait_for_log(r"(?s)(?:init_process_group\(backend=gloo\).*){2}",
                            timeout=START_TIMEOUT_S), job.read_log()
    log = job.read_log()
    assert "world_size=4" in log and "CUDA_VISIBLE_DEVICES=0,1: spawning one process per device (2)" in log
    rank0 = int(re.search(r"\[launcher\] rank 0 \(local_rank 0\) started \(pid (\d+)\)", log).group(1))
    ranks = [p for p in group_members(job.pgid)
             if b"--rank-process" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(ranks) == 2 and rank0 in ranks  # ranks 2 and 3 were never started

    code, report = run_json("run", "ddp-errors", "--set", f"log={job.log}", "--set", f"pid={rank0}")
    node = report["nodes"][0]
    conclusion = node["conclusion"]
    assert conclusion["id"] == "world-size-mismatch", [(e["step"], e["goto"], e["decided_by"])
                                                       for e in node["evidence"]]
    assert conclusion["taxonomy"] == ["launch.world-size"]
    assert node["path"][-1] == "world-size"
    assert code == 1
    # The evidence: the world size the rank was given and the devices there are for it.
    env = evidence(node, "job-env")["result"]["vars"]
    assert env["WORLD_SIZE"] == "4" and env["LOCAL_WORLD_SIZE"] == "4"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    torch_step = evidence(node, "world-size")
    torch_result = torch_step["result"]
    assert torch_result["world_size"] == 4 and torch_result["distributed"]["LOCAL_WORLD_SIZE"] == "4"
    assert torch_result["visible_devices"] == 2
    assert torch_result["device_count"] < 4  # 0 on a CPU-only torch
    assert torch_step["decided_by"]["result.visible_devices"] == 2
    assert torch_step["decided_by"]["result.distributed.LOCAL_WORLD_SIZE"] == "4"
    # The job really waits: both ranks are still there, in init_process_group (rank 0's store
    # polls for the missing clients, so it is sometimes R for a moment).
    assert all(_state(p) in ("S", "R") for p in ranks)
    assert "initialised process group" not in job.read_log()

    assert job.stop()
    assert not group_members(job.pgid)

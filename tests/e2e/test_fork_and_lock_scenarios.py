"""Issue #29: two real jobs that wait on a lock forever, diagnosed end to end on this machine.

- `dataloader_fork_deadlock`: a text classifier trains through epoch 1; epoch 2 re-forks its
  DataLoader workers while a background thread holds the dataset's cache lock, so each worker
  blocks forever on the inherited lock (futex wait) and the main thread waits in the DataLoader.
  `runbook run training-hang` concludes dataloader-fork-deadlock with the steps done, the workers'
  pids, the lock frame and the kernel wait.
- `stale_extension_lock`: a JIT build (`torch.utils.cpp_extension.load_inline`) waits in
  `FileBaton.wait` on the lock a killed build left in the job's TORCH_EXTENSIONS_DIR.
  `runbook run extension-errors` concludes stale-extension-lock with the lock path and its age and
  no build running; training-hang reaches the same conclusion from the job's stack.

RUNBOOK_RECORD_VERDICTS=runbooks/recordings records each diagnosis below as
runbooks/recordings/<scenario>[-training-hang]/incident.json (the test commits nothing).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from scenarios.jobs import Scenario

pytestmark = pytest.mark.e2e
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0  # torch imported on a busy 2-core machine
QUIET_S = 4.0  # the log has been silent this long before a diagnosis (stall_after is 3)
BUILDERS = {"ninja", "cc1plus", "nvcc"}


def record_args(folder: str) -> list[str]:
    """`--record BASE/FOLDER` when RUNBOOK_RECORD_VERDICTS=BASE (relative to the repository root)."""
    base = os.environ.get("RUNBOOK_RECORD_VERDICTS")
    return ["--record", str(ROOT / base / folder)] if base else []


def runbook(job: Scenario, *args: str) -> dict[str, Any]:
    """`python -m runbook ARGS --format json` with py-spy next to this Python on PATH."""
    env = job.tool_env()
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["RUNBOOK_LANG"] = "en"
    out = subprocess.run([sys.executable, "-m", "runbook", *args, "--format", "json"], capture_output=True,
                         text=True, env=env, timeout=300, cwd=ROOT)
    assert out.stdout, out.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def wait_quiet(log: Path, quiet_s: float, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if time.time() - log.stat().st_mtime >= quiet_s:
            return
        time.sleep(0.25)
    raise AssertionError(f"{log} kept moving for {timeout:g}s")


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return sorted(found)


def state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rfind(")") + 2:].split()[0]


def comms() -> set[str]:
    names = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                names.add((entry / "comm").read_text().strip())
            except OSError:
                continue
    return names


def walked(node: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(e["step"], e["goto"]) for e in node["evidence"]]


def assert_fixes_stay_in_the_job(report: dict[str, Any], job_pids: set[int]) -> None:
    """Every pid a rendered fix names is one of the job's processes."""
    for node in report["nodes"]:
        for fix in (node.get("conclusion") or {}).get("fixes") or []:
            for number in re.findall(r"\b\d{3,7}\b", fix.get("run") or ""):
                if Path(f"/proc/{number}").exists() and int(number) not in job_pids:
                    raise AssertionError(f"fix names pid {number}, not the job's: {fix}")


# -- dataloader_fork_deadlock ----------------------------------------------------------------------


def test_dataloader_fork_deadlock_diagnosed(scenario) -> None:
    job = scenario("dataloader_fork_deadlock", speed=4)
    assert job.wait_for_log(r"epoch 2 \| started", START_TIMEOUT_S), job.read_log()[-2000:]
    wait_quiet(job.log, QUIET_S, 60)
    log = job.read_log()
    steps = [int(s) for s in re.findall(r"(?m)^epoch 1 \| step (\d+) \|", log)]
    assert steps == list(range(1, 25)), log[-2000:]  # all of epoch 1, then nothing
    assert not re.search(r"(?m)^epoch 2 \| step", log)
    # The real state: two workers forked at epoch 2, alive and asleep on a futex.
    workers = children(job.pid)
    assert len(workers) == 2, workers
    for pid in workers:
        assert state(pid) == "S"
        assert Path(f"/proc/{pid}/wchan").read_text().startswith("futex"), pid

    report = runbook(job, "run", "training-hang", "--set", f"log={job.log}", "--set", "stall_after=3",
                     *record_args("dataloader_fork_deadlock"))
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "dataloader-fork-deadlock", walked(node)
    assert node["conclusion"]["taxonomy"] == ["hang.dataloader"]
    finding = node["finding"]
    for pid in workers:
        assert str(pid) in finding, finding
    assert f"forked by pid {job.pid}" in finding
    assert "dataloader_fork_deadlock/train.py:" in finding and "TokenCache.lookup" in finding
    assert "kernel wait: futex" in finding and "`_try_get_data`" in finding
    assert "the last step logged was 24 (latest epoch: 2)" in finding
    stack = next(e["result"] for e in node["evidence"] if e["step"] == "stack-dump")
    assert {p["pid"]: p["main_wait"] for p in stack["processes"]} == {
        job.pid: "dataloader", **dict.fromkeys(workers, "lock")}
    assert_fixes_stay_in_the_job(report, {job.pid, *workers})
    dump = next(f for f in node["conclusion"]["fixes"] if "py-spy dump" in (f.get("run") or ""))
    assert all(str(pid) in dump["run"] for pid in (job.pid, *workers)) and dump["effect"] == "read-only"


# -- stale_extension_lock ------------------------------------------------------------------------


def test_stale_extension_lock_diagnosed(scenario) -> None:
    job = scenario("stale_extension_lock")
    assert job.wait_for_log(r"as PyTorch extensions root\.\.\.", START_TIMEOUT_S), job.read_log()[-2000:]
    wait_quiet(job.log, QUIET_S, 60)
    lock = job.workdir / "torch_extensions" / "fused_scale" / "lock"
    assert lock.is_file()
    killed = int(re.search(r"previous build of fused_scale \(pid (\d+)\)", job.read_log()).group(1))
    assert not Path(f"/proc/{killed}").exists()  # the build that took the lock is gone
    assert job.is_alive() and not BUILDERS & comms()
    environ = Path(f"/proc/{job.pid}/environ").read_bytes().split(b"\0")
    assert f"TORCH_EXTENSIONS_DIR={lock.parent.parent}".encode() in environ

    report = runbook(job, "run", "extension-errors", "--set", f"log={job.log}",
                     *record_args("stale_extension_lock"))
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "stale-extension-lock", walked(node)
    age = time.time() - lock.stat().st_mtime
    match = re.search(rf"lock {re.escape(str(lock))} \(age (\d+) s\)", node["finding"])
    assert match, node["finding"]
    assert 0 <= int(match.group(1)) <= age + 1
    assert "no ninja or compiler process runs" in node["finding"]

    # From the entry point: the job's stack says FileBaton.wait, and extension-errors finds the lock.
    report = runbook(job, "run", "training-hang", "--set", f"log={job.log}", "--set", "stall_after=3",
                     *record_args("stale_extension_lock-training-hang"))
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "stale-extension-lock", walked(node)
    assert node["conclusion"]["runbook"] == "extension-errors"
    assert ("stack-dump", "extension-errors:find-locks") in walked(node)
    assert str(lock) in node["finding"] and f"pid {job.pid} waits in FileBaton.wait" in node["finding"]
    stack = next(e["result"] for e in node["evidence"] if e["step"] == "stack-dump")
    main = next(p for p in stack["processes"] if p["pid"] == job.pid)
    assert (main["main_wait"], main["main_op"]) == ("extension-lock", "FileBaton.wait")
    assert main["extensions_dir"] == str(lock.parent.parent)

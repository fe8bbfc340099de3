"""The `limits` check: ulimit -u from /proc/PID/limits, the tightest pids.max up a cgroup tree
(v2 and the v1 pids controller), the kernel's limits, and the threads of a real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runbook.checks import _task_limits
from runbook.checks.host import limits

# /proc/PID/limits as the kernel writes it (the columns of fs/proc/base.c).
LIMITS_TEXT = (
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max processes             4096                 513046               processes \n"
    "Max open files            1024                 1048576              files     \n"
)

# A child that starts 7 threads and waits: 8 tasks in all.
THREADS = ("import threading, time, sys\n"
           "ev = threading.Event()\n"
           "ts = [threading.Thread(target=ev.wait, daemon=True) for _ in range(7)]\n"
           "[t.start() for t in ts]\n"
           "print('ready', flush=True); sys.stdin.read()\n")


def test_the_soft_nproc_limit_is_read() -> None:
    assert limits.parse_nproc(LIMITS_TEXT) == 4096
    assert limits.parse_nproc(LIMITS_TEXT.replace("4096 ", "unlimited ")) is None
    assert limits.parse_nproc("") is None


def _cgroup(folder: Path, limit: str, current: int, refused: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pids.max").write_text(f"{limit}\n")
    (folder / "pids.current").write_text(f"{current}\n")
    (folder / "pids.events").write_text(f"max {refused}\n")


def test_the_tightest_pids_max_on_the_way_up_a_v2_tree(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    _cgroup(tmp_path / "system.slice", "10000", 300)
    _cgroup(tmp_path / "system.slice" / "slurmstepd.scope", "512", 500, refused=3)  # TasksMax=512
    _cgroup(tmp_path / "system.slice" / "slurmstepd.scope" / "job_42", "max", 500)
    text = "0::/system.slice/slurmstepd.scope/job_42\n"
    dirs = _task_limits.pids_cgroup_dirs(text, str(tmp_path))
    assert dirs[0].endswith("job_42") and dirs[-1] == str(tmp_path)
    found = _task_limits.pids_limit(text, str(tmp_path))
    assert found == {"cgroup": str(tmp_path / "system.slice" / "slurmstepd.scope"), "pids_max": 512,
                     "pids_current": 500, "pids_events_max": 3}


def test_the_v1_pids_controller(tmp_path: Path) -> None:
    _cgroup(tmp_path / "pids" / "docker" / "abc", "4096", 4090)
    text = "9:name=systemd:/docker/abc\n8:pids:/docker/abc\n4:memory:/docker/abc\n"
    found = _task_limits.pids_limit(text, str(tmp_path))
    assert (found["cgroup"], found["pids_max"], found["pids_current"]) == (
        str(tmp_path / "pids" / "docker" / "abc"), 4096, 4090)
    assert _task_limits.pids_limit("4:memory:/x\n", str(tmp_path))["cgroup"] is None


def test_a_real_process_threads_and_the_node_limits(make_ctx) -> None:
    child = subprocess.Popen([sys.executable, "-c", THREADS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        result = limits.run({"pid": child.pid, "near_percent": 0}, make_ctx())
    finally:
        child.communicate("", timeout=30)
    assert result["available"] and result["job_found"] and result["pids"] == [child.pid]
    assert result["job_threads"] == 8
    assert result["threads_max"] > 0 and result["pid_max"] > 0 and result["tasks_total"] >= 8
    names = [lim["name"] for lim in result["limits"]]
    assert "kernel.threads-max" in names and "kernel.pid_max" in names
    assert set(result["near"]) == set(names)  # near_percent 0: every limit counts as near
    assert result["tightest"]["percent"] == max(lim["percent"] for lim in result["limits"])
    if result["uid"] != 0 and result["nproc_limit"] is not None:
        assert "ulimit -u (RLIMIT_NPROC)" in names and result["user_tasks"] >= 8


def test_no_job_process_gives_the_node_view(make_ctx) -> None:
    result = limits.run({"pid": 999999999}, make_ctx())
    assert not result["job_found"] and result["pids"] == [] and result["job_threads"] == 0
    assert result["available"] and result["threads_max"]
    assert result["near"] == [] or all(isinstance(n, str) for n in result["near"])


# A child that lowers its own soft limit on open files to 64 and holds 40 more descriptors.
OPEN_FILES = ("import os, resource, sys\n"
              "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))\n"
              "held = [os.open(os.devnull, os.O_RDONLY) for _ in range(40)]\n"
              "print('ready', flush=True); sys.stdin.read()\n")


def test_the_open_files_of_the_process_holding_the_most_and_its_limit() -> None:
    child = subprocess.Popen([sys.executable, "-c", OPEN_FILES], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        result = limits.run({"pid": str(child.pid)}, None)  # type: ignore[arg-type]
        assert result["open_fds_pid"] == child.pid and result["nofile_limit"] == 64
        assert 43 <= result["open_fds"] < 64  # the 40, stdin, stdout, stderr (and what Python keeps)
        assert result["nofile_hard"] is None or result["nofile_hard"] >= 64
        assert all(lim["name"] != "ulimit -n" for lim in result["limits"])  # not a task limit
    finally:
        child.kill()
        child.wait()

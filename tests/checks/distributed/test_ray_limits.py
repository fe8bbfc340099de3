"""The `ray_limits` check: the limits Ray workers inherit from the raylet (/proc/PID/limits),
the user's threads, the cgroup's pids limit and /dev/shm."""

from __future__ import annotations

import os
import resource

from runbook.checks import _task_limits
from runbook.checks.distributed import ray_limits

# /proc/PID/limits as Linux prints it (a container at its default open-files limit).
LIMITS = """\
Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max processes             4096                 4096                 processes
Max open files            1024                 1048576              files
Max locked memory         8388608              8388608              bytes
"""


def test_limits_are_parsed_with_unlimited_as_none() -> None:
    parsed = _task_limits.parse_limits(LIMITS)
    assert parsed["Max open files"] == (1024, 1048576)
    assert parsed["Max processes"] == (4096, 4096)
    assert parsed["Max cpu time"] == (None, None)


def test_a_named_process(make_ctx) -> None:
    result = ray_limits.run({"pid": os.getpid()}, make_ctx())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert result["source"] == f"pid {os.getpid()}" and result["pid"] == os.getpid()
    assert result["open_files_soft"] == (None if soft == resource.RLIM_INFINITY else soft)
    assert result["open_files_hard"] == (None if hard == resource.RLIM_INFINITY else hard)
    assert result["open_files_used"] >= 3
    assert result["user_threads"] >= 1
    assert result["object_store_bytes"] is None
    assert set(result) >= {"pids_max", "pids_current", "shm_bytes", "shm_free_bytes", "processes_soft"}


def test_without_a_raylet_the_probe_reads_its_own(make_ctx, monkeypatch) -> None:
    monkeypatch.setattr(ray_limits, "find_raylet", lambda: None)
    result = ray_limits.run({}, make_ctx())
    assert result["source"] == "this probe" and result["pid"] is None
    assert result["open_files_soft"] == ray_limits.own_limits()["Max open files"][0]


def test_the_raylet_a_driver_started_is_read(monkeypatch) -> None:
    """Given a driver's pid, the raylet it started (`ray.init()`: a child) is whose limits count;
    given the raylet itself, or a process without one, that process."""
    procs = {100: ("python", 1), 101: ("raylet", 100), 102: ("gcs_server", 100), 200: ("raylet", 1)}
    monkeypatch.setattr(ray_limits._procfs, "pids", lambda: sorted(procs))
    monkeypatch.setattr(ray_limits, "_is_raylet", lambda pid: procs.get(pid, ("", 0))[0] == "raylet")
    monkeypatch.setattr(ray_limits, "_ppid", lambda pid: procs[pid][1])
    monkeypatch.setattr(ray_limits, "_uid", lambda pid: os.getuid())
    monkeypatch.setattr(ray_limits.os, "access", lambda path, mode: True)
    assert ray_limits._target(100) == (101, "raylet pid 101 (started by pid 100)")
    assert ray_limits._target(200) == (200, "raylet pid 200")
    assert ray_limits._target(102) == (102, "pid 102")
    assert ray_limits._target(None) == (101, "raylet pid 101")

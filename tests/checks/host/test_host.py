"""`host` against this machine's /proc, a recorded kernel log, and a real process in D state."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from runbook.checks import _procfs
from runbook.checks.host import host

DATA = Path(__file__).resolve().parents[1] / "data"
DMESG_OOM = DATA / "dmesg_T_oom.txt"
JOURNAL = DATA / "journalctl_kernel_8xH100.txt"


def fake_bin(tmp_path: Path, **scripts: str) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        script = bindir / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def test_this_machine(make_ctx) -> None:
    result = host.run({}, make_ctx(8.0))
    assert abs(result["uptime_s"] - _procfs.uptime()) < 5
    booted = datetime.datetime.fromisoformat(result["boot_time"]).timestamp()
    assert abs(booted - (time.time() - result["uptime_s"])) < 5
    assert result["recent_reboot"] == (result["uptime_s"] < 3600)
    assert result["cpu_count"] == os.cpu_count()
    assert result["load_per_core"] == round(result["load_avg"][0] / result["cpu_count"], 2)
    mem = result["mem"]
    assert 0 < mem["available_mib"] <= mem["total_mib"] and 0 <= mem["used_percent"] <= 100
    assert result["swap_used_mib"] >= 0
    assert set(result["disks"]) == {"/", "/tmp"}
    root = result["disks"]["/"]
    assert root["full"] == (root["used_percent"] >= 95) and root["total_gib"] > 0
    assert result["disks_full"] == [p for p, d in result["disks"].items() if d["full"]]
    assert result["d_state_count"] == len(result["d_state"])
    assert os.getpid() not in [p["pid"] for p in result["d_state"]]
    assert isinstance(result["oom_readable"], bool)
    assert result["oom_count"] == len(result["oom_kills"])


def test_a_log_written_since_the_boot(tmp_path: Path, make_ctx) -> None:
    fresh, stale = tmp_path / "train-1.log", tmp_path / "train-0.log"
    fresh.write_text("step 1\n")
    stale.write_text("step 0\n")
    booted = time.time() - _procfs.uptime()
    os.utime(stale, (booted - 60, booted - 60))  # last written a minute before this machine booted
    assert host.run({"log": str(fresh)}, make_ctx())["log_since_boot"] is True
    assert host.run({"log": str(stale)}, make_ctx())["log_since_boot"] is False
    newest = host.run({"log": str(tmp_path / "train-*.log")}, make_ctx())
    assert newest["log_since_boot"] is True
    assert host.run({"log": str(tmp_path / "none.log")}, make_ctx())["log_since_boot"] is None
    assert host.run({}, make_ctx())["log_since_boot"] is None


def test_missing_path_and_full_disk(tmp_path: Path, make_ctx) -> None:
    result = host.run({"paths": [str(tmp_path / "nope"), str(tmp_path)]}, make_ctx())
    assert result["disks"][str(tmp_path / "nope")] is None
    assert result["disks"][str(tmp_path)]["free_gib"] >= 0


def test_parse_recorded_oom_kills() -> None:
    kills = host.parse_oom(DMESG_OOM.read_text().splitlines())
    for kill in kills:
        assert kill.pop("_epoch") is not None
    assert [(k["pid"], k["process"], k["constraint"]) for k in kills] == [
        (51877, "pt_data_worker", "CONSTRAINT_NONE"),  # a DataLoader worker: the host ran out
        (60231, "python", "CONSTRAINT_MEMCG"),         # the container's memory limit
        (61002, "ray::IDLE", None),                    # an older kernel: no oom-kill: line
    ]
    assert kills[0]["time"].startswith("2024-03-05T16:03:12")
    assert kills[0]["message"].startswith("Out of memory: Killed process 51877 (pt_data_worker) ")
    assert kills[1]["message"].startswith("Memory cgroup out of memory: Killed process 60231")
    assert all(len(k["message"]) <= 160 for k in kills)


def test_oom_kills_from_dmesg_and_window(tmp_path: Path, make_ctx) -> None:
    env = fake_bin(tmp_path, dmesg=f'cat "{DMESG_OOM}"\n')
    everything = host.run({"oom_window_s": 1e10}, make_ctx(env=env))
    assert everything["oom_readable"] is True and everything["oom_reason"] is None
    assert everything["oom_count"] == 3
    assert [k["pid"] for k in everything["oom_kills"]] == [51877, 60231, 61002]
    assert "_epoch" not in everything["oom_kills"][0]
    recent = host.run({}, make_ctx(env=env))  # the last day: 2024 is long gone
    assert recent["oom_count"] == 0 and recent["oom_kills"] == []


def test_oom_kills_from_journalctl(tmp_path: Path, make_ctx) -> None:
    env = fake_bin(tmp_path, dmesg="echo 'dmesg: read kernel buffer failed: Operation not "
                                   "permitted' >&2\nexit 1\n", journalctl=f'cat "{JOURNAL}"\n')
    result = host.run({"oom_window_s": 1e10}, make_ctx(env=env))
    [kill] = result["oom_kills"]
    assert kill["pid"] == 51877 and kill["constraint"] == "CONSTRAINT_NONE"
    when = datetime.datetime.fromisoformat(kill["time"])
    assert when == datetime.datetime(2024, 3, 5, 16, 3, 12, tzinfo=datetime.timezone.utc)


def test_kernel_log_unreadable(tmp_path: Path, make_ctx) -> None:
    env = fake_bin(tmp_path, dmesg="echo 'dmesg: read kernel buffer failed: Operation not "
                                   "permitted' >&2\nexit 1\n", journalctl="exit 1\n")
    result = host.run({}, make_ctx(env=env))
    assert result["oom_readable"] is False and result["oom_kills"] == []
    assert result["oom_reason"] == (
        "kernel log not readable: dmesg: dmesg: read kernel buffer failed: Operation not permitted; "
        "journalctl: exit 1")


def test_d_state_from_a_fake_proc(tmp_path: Path, make_ctx) -> None:
    """A training process whose NCCL thread is stuck in the driver (main thread sleeping)."""
    for pid, tids, states in ((4821, (4821, 4830), ("S", "D")), (4900, (4900,), ("S",))):
        base = tmp_path / str(pid)
        (base / "task").mkdir(parents=True)
        (base / "comm").write_text("python\n")
        (base / "cmdline").write_bytes(b"python\0train.py\0--nnodes\x002\0")
        (base / "wchan").write_text("0")
        for tid, state in zip(tids, states, strict=True):
            (base / "task" / str(tid)).mkdir()
            (base / "task" / str(tid) / "stat").write_text(
                f"{tid} (python) {state} 1 {tid} 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n")
            (base / "task" / str(tid) / "wchan").write_text(
                "os_acquire_spinlock" if state == "D" else "futex_wait_queue")
    found = host.d_state_processes(make_ctx(), proc=str(tmp_path))
    assert found == [{"pid": 4821, "comm": "python", "cmdline": "python train.py --nnodes 2",
                      "wchan": "os_acquire_spinlock", "threads_d": 1}]


VFORK_C = r"""
#include <unistd.h>
int main(void) {
    /* The parent of a vfork waits in the kernel, uninterruptibly (D), until the child exits. */
    if (vfork() == 0) { sleep(3); _exit(0); }
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build a D-state process")
def test_real_process_in_d_state(tmp_path: Path, make_ctx) -> None:
    source = tmp_path / "vfork.c"
    source.write_text(VFORK_C)
    binary = tmp_path / "vfork_wait"
    subprocess.run(["cc", "-o", str(binary), str(source)], check=True, capture_output=True)
    proc = subprocess.Popen([str(binary)])
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            stat = Path(f"/proc/{proc.pid}/stat").read_text()
            if stat.rpartition(")")[2].split()[0] == "D":
                break
            time.sleep(0.02)
        else:
            pytest.skip("this kernel does not show a vfork parent in D state")
        result = host.run({}, make_ctx(8.0))
    finally:
        proc.wait(timeout=10)
    [mine] = [p for p in result["d_state"] if p["pid"] == proc.pid]
    assert mine["comm"] == "vfork_wait" and mine["cmdline"] == str(binary)
    assert mine["threads_d"] == 1
    assert result["d_state_count"] >= 1

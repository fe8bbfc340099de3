"""`process` against real child processes started by the test."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from runbook.checks import _procfs
from runbook.checks.host import process

SPIN = "import sys\nprint('ready', flush=True)\nwhile True:\n    pass\n"
SLEEP = "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n"


@pytest.fixture
def spawn() -> Iterator:
    """spawn(code, **env) -> a running Python child that has printed 'ready'; killed after."""
    children: list[subprocess.Popen] = []

    def start(code: str, **env: str) -> subprocess.Popen:
        marker = f"runbook-test-{uuid.uuid4().hex}"
        child = subprocess.Popen(
            [sys.executable, "-c", code, marker], stdout=subprocess.PIPE,
            env={**os.environ, **env},
        )
        children.append(child)
        child.marker = marker  # type: ignore[attr-defined]
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"  # exec'd, env in place, code running
        return child

    try:
        yield start
    finally:
        for child in children:
            child.kill()
            child.wait(timeout=5)


def entry(result: dict, pid: int) -> dict:
    [found] = [p for p in result["processes"] if p["pid"] == pid]
    return found


def test_auto_finds_busy_rank(spawn, make_ctx) -> None:
    child = spawn(SPIN, RANK="3", LOCAL_RANK="3", WORLD_SIZE="8")
    result = process.run({}, make_ctx(5.0))
    me = entry(result, child.pid)
    assert result["how"] == "auto"
    assert result["found"] is True
    assert me["rank"] == 3 and me["local_rank"] == 3 and me["world_size"] == 8
    assert me["cpu_percent"] > 20  # a busy loop; this 2-core box is shared, so not ~100
    assert me["state"] == "R"
    assert me["threads"] == 1
    assert me["ppid"] == os.getpid()
    assert me["zombie"] is False
    assert me["cmdline"].endswith(child.marker)
    assert 0 <= me["age_s"] < 30
    assert me["rss_mib"] > 1
    assert 3 in result["ranks"]
    assert result["cpu_percent"] >= me["cpu_percent"]


def test_auto_sleeping_rank_is_idle(spawn, make_ctx) -> None:
    busy = spawn(SPIN, RANK="0", WORLD_SIZE="2")
    idle = spawn(SLEEP, RANK="1", WORLD_SIZE="2")
    result = process.run({"pid": "", "match": ""}, make_ctx(5.0))
    assert result["how"] == "auto"
    me = entry(result, idle.pid)
    assert me["state"] == "S"
    assert me["cpu_percent"] < 5
    assert me["rank"] == 1
    pids = [p["pid"] for p in result["processes"]]
    assert pids.index(busy.pid) < pids.index(idle.pid)  # busiest first
    assert {0, 1} <= set(result["ranks"])


def test_auto_excludes_probe_and_ancestors(make_ctx) -> None:
    result = process.run({"match": "."}, make_ctx(3.0))
    pids = {p["pid"] for p in result["processes"]}
    assert os.getpid() not in pids
    assert os.getppid() not in pids


def test_auto_off_selects_nothing(make_ctx) -> None:
    for off in (False, "false", "0"):
        result = process.run({"auto": off}, make_ctx(3.0))
        assert result["found"] is False
        assert result["reason"] == "no pid or match given and auto is off"


def test_pid_selection(spawn, make_ctx) -> None:
    child = spawn(SLEEP)
    for given in (child.pid, str(child.pid)):
        result = process.run({"pid": given, "match": "ignored-when-pid-given"}, make_ctx(3.0))
        assert result["how"] == "pid"
        assert result["count"] == 1
        assert result["pid"] == child.pid
        assert result["state"] == "S"
        assert result["threads"] == 1
        assert result["processes"][0]["rank"] is None
        assert result["reason"] is None
        assert result["d_state"] is False


def test_match_selection(spawn, make_ctx) -> None:
    child = spawn(SLEEP, RANK="7")
    other = spawn(SLEEP, RANK="6")
    result = process.run({"match": child.marker}, make_ctx(3.0))
    assert result["how"] == "match"
    assert [p["pid"] for p in result["processes"]] == [child.pid]
    assert result["ranks"] == [7]
    assert other.pid != child.pid


def test_match_nothing_and_bad_regex(make_ctx) -> None:
    result = process.run({"match": "no-such-process-" + uuid.uuid4().hex}, make_ctx(3.0))
    assert result["found"] is False and result["count"] == 0
    assert result["reason"].startswith("no process command line matches /no-such-process-")
    bad = process.run({"match": "(unclosed"}, make_ctx(3.0))
    assert bad["found"] is False
    assert bad["reason"].startswith("invalid match regex '(unclosed'")


def test_nonexistent_pid(make_ctx) -> None:
    missing = _procfs.pids()[-1] + 10_000_000
    result = process.run({"pid": missing}, make_ctx(3.0))
    assert result == {
        "found": False, "count": 0, "how": "pid", "reason": f"no process with pid {missing}",
        "unreadable": 0, "processes": [], "pid": None, "cpu_percent": 0.0, "state": None,
        "threads": None, "age_s": None, "d_state": False, "zombies": 0, "ranks": [],
        "tied_by": None, "pids": [], "job_exited": False, "log": None, "log_writers": [],
        "foreign": [], "foreign_pids": [],
    }


def test_zombie_is_reported_and_flagged(make_ctx) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 5
        while _procfs.stat(child.pid)["state"] != "Z" and time.monotonic() < deadline:
            time.sleep(0.02)
        result = process.run({"pid": child.pid}, make_ctx(3.0))
        assert result["state"] == "Z"
        assert result["processes"][0]["zombie"] is True
        assert result["zombies"] == 1
        assert result["processes"][0]["cmdline"].startswith("[python")
    finally:
        child.wait(timeout=5)


UNREAPED = """import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "pass"])
state = lambda: open(f"/proc/{child.pid}/stat").read().rpartition(")")[2].split()[0]
while state() != "Z":
    time.sleep(0.01)
print("ready", flush=True)
print(child.pid, flush=True)
time.sleep(60)
"""


def test_auto_keeps_unreaped_child_of_a_rank(spawn, make_ctx) -> None:
    parent = spawn(UNREAPED, RANK="2", WORLD_SIZE="4")
    zombie_pid = int(parent.stdout.readline())
    result = process.run({}, make_ctx(5.0))
    zombie = entry(result, zombie_pid)
    assert zombie["state"] == "Z" and zombie["zombie"] is True
    assert zombie["ppid"] == parent.pid
    assert zombie["rank"] is None  # a zombie's environment is gone
    assert entry(result, parent.pid)["rank"] == 2
    assert result["zombies"] >= 1


def test_parse_stat_with_odd_comm() -> None:
    fields = ["S", "41", "40", "39"] + ["0"] * 7 + ["120", "30"] + ["0"] * 4 + ["9", "0", "5000", "0", "256"]
    parsed = _procfs.parse_stat("1234 (py (x) y) " + " ".join(fields))
    assert parsed == {
        "pid": 1234, "comm": "py (x) y", "state": "S", "ppid": 41, "pgrp": 40, "session": 39,
        "utime": 120, "stime": 30,
        "threads": 9, "starttime": 5000, "rss_pages": 256,
    }


def test_a_rank_launched_by_srun_alone_has_slurms_names() -> None:
    from runbook.checks.host.process import env_rank

    slurm = {"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8"}
    assert [env_rank(slurm, n) for n in ("RANK", "LOCAL_RANK", "WORLD_SIZE")] == [3, 1, 8]
    torchrun = {**slurm, "RANK": "5", "LOCAL_RANK": "0", "WORLD_SIZE": "16"}  # torch's names win
    assert [env_rank(torchrun, n) for n in ("RANK", "LOCAL_RANK", "WORLD_SIZE")] == [5, 0, 16]
    assert env_rank({}, "RANK") is None

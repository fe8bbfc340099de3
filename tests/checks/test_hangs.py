"""A check stuck in the kernel is a finding within its timeout, never a hung run.

Two real hangs: a FUSE mount whose server never answers (what a dead NFS server does to a
reader: stat() sleeps in the kernel, state D) and a /proc file of a process that blocks its
reader (a FIFO bind-mounted over /proc/PID/environ in a private mount namespace). Both need
root and the kernel's FUSE and mount namespaces; they are skipped, saying so, where those
are missing. The FIFO case at the end needs nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runbook import probe

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "RUNBOOK_LANG": "en",
       "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "engine"), os.environ.get("PYTHONPATH")) if p)}


def runbook(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout, cwd=ROOT)


@pytest.fixture
def dead_mount(tmp_path: Path) -> Iterator[Path]:
    """A FUSE file system whose server never answers: every access sleeps in the kernel."""
    if os.geteuid() != 0 or not Path("/dev/fuse").exists() or shutil.which("mount") is None:
        pytest.skip("needs root, /dev/fuse and mount(8) to make a dead mount")
    point = tmp_path / "dead"
    point.mkdir()
    fd = os.open("/dev/fuse", os.O_RDWR)
    mounted = subprocess.run(["mount", "-i", "-t", "fuse", "-o",
                              f"fd={fd},rootmode=40000,user_id=0,group_id=0", "deadfs", str(point)],
                             pass_fds=[fd], capture_output=True, text=True, timeout=10)
    if mounted.returncode != 0:
        os.close(fd)
        pytest.skip(f"cannot mount FUSE here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:  # detach first: nothing may touch the dead mount again, pytest's clean-up included
        subprocess.run(["umount", "-l", str(point)], capture_output=True, timeout=10)
        os.close(fd)


def test_a_log_on_a_dead_mount_is_a_timeout_finding(dead_mount: Path) -> None:
    started = time.monotonic()
    # 5 s: the probe must start and reach the read inside the budget, also on a loaded machine
    # (with 2 s it was sometimes killed before it started: "no answer", not this finding).
    done = runbook("check", "log", "--with", f"path={dead_mount}/train.log", "--timeout", "5",
                   "--format", "json")
    elapsed = time.monotonic() - started
    node = json.loads(done.stdout)["nodes"][0]
    assert node["status"] == "ok" and node["result"]["timed_out"] is True, node
    assert node["result"]["reason"] == ("the check did not return within 5s: a read or system call "
                                        "hangs (a dead network mount, a stuck /proc entry or device)")
    assert elapsed < 20, elapsed  # 5 s and the start-up; generous for a loaded machine


def test_training_hang_concludes_on_a_log_it_cannot_read(dead_mount: Path) -> None:
    done = runbook("run", "training-hang", "--set", f"log={dead_mount}/train.log", "--format", "json")
    node = json.loads(done.stdout)["nodes"][0]
    # Whether or not a training process is found, the log read that hangs is the finding.
    assert node["status"] == "concluded", node
    last = node["evidence"][-1]
    assert last["step"] in ("read-log", "exit-signatures") and last["result"]["timed_out"] is True
    assert node["conclusion"]["id"] == "log-unreadable"


def test_a_proc_file_that_blocks_its_reader(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    fifo = tmp_path / "environ"
    os.mkfifo(fifo)
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"})
    try:
        script = (f"mount --bind {fifo} /proc/{rank.pid}/environ && exec {sys.executable} -m runbook "
                  f"check process --with pid={rank.pid} --timeout 2 --format json")
        done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                              capture_output=True, text=True, env=ENV, timeout=60, cwd=ROOT)
        if done.returncode != 0 and not done.stdout:
            pytest.skip(f"cannot bind-mount over /proc here: {done.stderr.strip()[-300:]}")
        result = json.loads(done.stdout)["nodes"][0]["result"]
        assert result["timed_out"] is True and "a read or system call hangs" in result["reason"]
    finally:
        rank.kill()
        rank.wait(timeout=10)


def test_the_probe_answers_on_time_whatever_the_check_waits_on(tmp_path: Path) -> None:
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)

    def stuck() -> dict[str, object]:
        with open(fifo) as fh:  # blocks: nobody opens the other end
            return {"data": fh.read()}

    started = time.monotonic()
    answer = probe._run_bounded(stuck, 0.5)
    assert time.monotonic() - started < 5
    assert answer["result"]["timed_out"] is True
    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the stuck thread go
    assert probe._run_bounded(lambda: {"x": 1}, 5) == {"result": {"x": 1, "timed_out": False}}
    failed = probe._run_bounded(lambda: 1 / 0, 5)  # type: ignore[arg-type, return-value]
    assert failed["error"] == "ZeroDivisionError: division by zero" and "traceback" in failed

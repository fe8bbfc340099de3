"""The lifecycle the test clusters share (scenarios/clusters/daemon.py, group.py), on small real
daemons: shells and sleeps started here, in their own sessions or PID namespaces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import daemon_fixture  # first: `scenarios` is the repository's package

from scenarios.clusters.daemon import (  # isort: skip
    Daemon,
    DaemonError,
    PortTaken,
    kill_recorded,
    stop_all,
    wait_ready,
)
from scenarios.clusters.group import DaemonGroup, down  # isort: skip
from scenarios.clusters.procs import cmdline, pid_alive  # isort: skip

_wait = daemon_fixture.wait_for
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
needs_namespaces = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                      reason="needs root and unshare")


def _ours(marker: str) -> list[int]:
    """Live processes whose command line names `marker`."""
    return [int(p) for p in os.listdir("/proc")
            if p.isdigit() and marker in cmdline(int(p)) and pid_alive(int(p))]


def _sleep(folder: Path) -> str:
    """`sleep`, by a link in `folder`: the command line of each sleep names the folder."""
    link = folder / "sleep"
    if not link.exists():
        folder.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shutil.which("sleep") or "/bin/sleep")
    return str(link)


def _shell(tmp_path: Path, script: str, name: str = "d") -> Daemon:
    """A daemon: `sh -c SCRIPT` ($1: tmp_path, $S: a sleep naming it); its out file there."""
    daemon = Daemon(name, out=tmp_path / f"{name}.out")
    daemon.spawn(["/bin/sh", "-c", f"S={_sleep(tmp_path)}; {script}", "sh", str(tmp_path)])
    return daemon


def test_a_daemon_and_everything_it_started_stop_together(tmp_path: Path) -> None:
    daemon = _shell(tmp_path, '$S 300 & $S 301 & touch "$1/ready"; wait')
    wait_ready([daemon], (tmp_path / "ready").exists, 10, lambda: "no ready file")
    assert _wait(lambda: len(_ours(str(tmp_path))) == 3, 5)  # the shell and its two sleeps
    assert daemon.is_alive() and daemon.pids() == {daemon.pid}
    start = time.monotonic()
    assert stop_all([daemon], wait=5) is True
    assert time.monotonic() - start < 3
    assert _wait(lambda: _ours(str(tmp_path)) == [], 5)
    assert not daemon.is_alive() and daemon.pids() == set()


def test_a_daemon_that_exits_is_an_error_at_once_with_its_log(tmp_path: Path) -> None:
    daemon = _shell(tmp_path, "echo 'fatal: no config'; exit 3")
    start = time.monotonic()
    with pytest.raises(DaemonError, match=r"d exited \(rc=3\): fatal: no config"):
        wait_ready([daemon], lambda: False, 30, lambda: "never")
    assert time.monotonic() - start < 5


def test_a_daemon_that_cannot_bind_its_port_says_so(tmp_path: Path) -> None:
    daemon = _shell(tmp_path, "echo 'bind 127.0.0.1:2222: Address already in use'; exit 1")
    with pytest.raises(PortTaken, match="Address already in use"):
        wait_ready([daemon], lambda: False, 30, lambda: "never")


def test_waiting_is_bounded_and_says_why(tmp_path: Path) -> None:
    daemon = _shell(tmp_path, "exec $S 300")
    start = time.monotonic()
    try:
        with pytest.raises(DaemonError, match=r"not ready after 0\.5s: still no socket"):
            wait_ready([daemon], lambda: False, 0.5, lambda: "still no socket")
        assert time.monotonic() - start < 3
    finally:
        assert stop_all([daemon])


@needs_namespaces
def test_a_namespaced_daemon_dies_with_its_namespace(tmp_path: Path) -> None:
    daemon = Daemon("ns", out=tmp_path / "ns.out")
    script = 'setsid "$0" 300 & ("$0" 301 &) ; touch "$1/ready"; wait'
    daemon.spawn(["unshare", "--pid", "--fork", "--mount-proc", "--", "/bin/sh", "-c", script,
                  _sleep(tmp_path), str(tmp_path)], namespaced=True)
    wait_ready([daemon], (tmp_path / "ready").exists, 10, lambda: "no ready file")
    assert daemon.ns_init_pid and daemon.ns_init_pid != daemon.pid
    assert _wait(lambda: len(daemon.pids()) == 4, 5), daemon.pids()  # unshare, sh, two sleeps
    sleeps = [p for p in daemon.pids() if cmdline(p).startswith(_sleep(tmp_path))]
    assert len(sleeps) == 2
    assert stop_all([daemon], wait=5) is True
    assert not any(pid_alive(p) for p in [*sleeps, daemon.pid, daemon.ns_init_pid])
    assert daemon.pids() == set()


def test_an_adopted_process_is_killed_with_its_descendants(tmp_path: Path) -> None:
    proc = subprocess.Popen(["/bin/sh", "-c", '"$0" 300 & wait', _sleep(tmp_path)])
    try:
        assert _wait(lambda: len(_ours(str(tmp_path))) == 2, 5)
        daemon = Daemon.adopt("raylet", proc.pid)
        assert daemon.is_alive() and daemon.pids() == {proc.pid}
        assert stop_all([daemon], wait=5) is True
        assert _wait(lambda: _ours(str(tmp_path)) == [], 5)
    finally:
        proc.kill()
        proc.wait(timeout=5)


def test_kill_recorded_leaves_a_pid_that_is_no_longer_ours(tmp_path: Path) -> None:
    mine = subprocess.Popen([_sleep(tmp_path), "300"], start_new_session=True)
    other = subprocess.Popen(["sleep", "302"], start_new_session=True)
    try:
        assert _wait(lambda: _ours(str(tmp_path)) == [mine.pid], 5)
        assert kill_recorded([mine.pid, other.pid, 0], str(tmp_path), wait=5) == 1
        assert mine.wait(timeout=5) == -9
        assert other.poll() is None
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait(timeout=5)


class Pair(DaemonGroup):
    """Two sleeping daemons; the first `fail_first` boots say their port was taken."""

    state_file = "pair.json"
    tries = 0

    def __init__(self, base: Path, fail_first: int) -> None:
        super().__init__(base)
        self.fail_first = fail_first
        self.a = Daemon("a", out=base / "a.out")
        self.b = Daemon("b", out=base / "b.out")

    def daemons(self) -> list[Daemon]:
        return [self.a, self.b]

    def _boot(self) -> None:
        assert self.base is not None
        self.base.mkdir(parents=True, exist_ok=True)
        for daemon in self.daemons():
            daemon.spawn([_sleep(self.base), "300"])
        type(self).tries += 1
        if type(self).tries <= self.fail_first:
            raise PortTaken("a: Address already in use")
        wait_ready(self.daemons(), lambda: True, 5, lambda: "")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "pair", **self.lifecycle_json()}


def test_a_group_starts_again_when_a_port_was_taken_and_leaves_nothing(tmp_path: Path) -> None:
    Pair.tries = 0
    group = Pair._start(lambda: Pair(tmp_path / "g", fail_first=1), attempts=3)
    try:
        assert Pair.tries == 2 and group.startup_s > 0
        # the first try's daemons are gone (a command line reads empty just after an exec: wait)
        assert _wait(lambda: len(_ours(str(tmp_path / "g"))) == 2, 5)
        state = json.loads((tmp_path / "g" / "pair.json").read_text())
        assert state["kind"] == "pair" and [d["name"] for d in state["daemons"]] == ["a", "b"]
        assert sorted(group.pids()) == sorted(d["pid"] for d in state["daemons"])
    finally:
        assert group.stop() is True
    assert group.pids() == [] and _ours(str(tmp_path / "g")) == []
    assert group.stop() is True  # idempotent
    assert (tmp_path / "g" / "pair.json").exists()  # files stay


def test_a_group_that_never_starts_raises_and_leaves_nothing(tmp_path: Path) -> None:
    Pair.tries = 0
    with pytest.raises(DaemonError, match="could not start the cluster: a: Address already in use"):
        Pair._start(lambda: Pair(tmp_path / "g", fail_first=5), attempts=2)
    assert Pair.tries == 2
    assert _ours(str(tmp_path / "g")) == []


def test_down_kills_what_a_state_file_records(tmp_path: Path) -> None:
    Pair.tries = 0
    group = Pair._start(lambda: Pair(tmp_path / "g", fail_first=0), attempts=1)
    try:
        assert _wait(lambda: len(_ours(str(tmp_path / "g"))) == 2, 5)
        assert down(tmp_path / "g", "pair.json", wait=5) == 2
        assert _ours(str(tmp_path / "g")) == []
    finally:
        group.stop()


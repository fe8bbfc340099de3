"""A scenario's bystander (registry `bystander`): another user's process the launcher starts
before the job, apart from it, that outlives the job and that `stop()` ends too.

The bystanders here are standard-library programs written by the test; scenario
`oom_other_process`'s own (a torch notebook) is checked in tests/e2e/test_verdict_scenarios.py.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runbook.checks._procfs import environ
from scenarios.jobs import SCENARIOS, Scenario, ScenarioError, load, start
from tests.daemon_fixture import group_gone

Launcher = Callable[..., Scenario]
IDLE = """# a comment the launcher leaves out of the command line
import os, sys, time
print(f"up {os.getpid()} {sys.argv[1]}", flush=True)
while True:
    time.sleep(3600)
"""


@pytest.fixture
def with_bystander(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str], str]:
    """with_bystander(code) -> the name of a scenario: `healthy` with `code` as its bystander."""

    def make(code: str) -> str:
        path = tmp_path / "bystander.py"
        path.write_text(code)
        spec = dataclasses.replace(SCENARIOS["healthy"], name="healthy_with_bystander",
                                   bystander=str(path))  # absolute: SCENARIO_ROOT / it is itself
        monkeypatch.setitem(SCENARIOS, spec.name, spec)
        return spec.name

    return make


def test_bystander_runs_apart_from_the_job_and_stop_ends_both(launch: Launcher,
                                                               with_bystander) -> None:
    sc = launch(with_bystander(IDLE))
    other = sc.bystander_pid
    assert other is not None and sc.bystander_alive() and sc.is_alive()
    assert os.getsid(other) == os.getpgid(other) == other != sc.pgid  # a session of its own
    argv = Path(f"/proc/{other}/cmdline").read_bytes().decode().split("\0")[:-1]
    assert argv[1:] == ["-c", IDLE.split("\n", 1)[1].rstrip("\n"), str(sc.workdir)], argv
    assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} & set(environ(other))
    # the job keeps what torchrun gives it; the kernel fills /proc/PID/environ a moment after
    # the exec that Popen waited for, so a loaded machine may show it empty at first
    deadline = time.monotonic() + 10
    while "RANK" not in environ(sc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert environ(sc.pid)["RANK"] == "0"
    assert Path(os.readlink(f"/proc/{other}/cwd")) != sc.workdir
    said = (sc.workdir / "bystander.log").read_text()
    assert said == f"up {other} {sc.workdir}\n"  # ready before the job started
    assert "up " not in sc.read_log()
    assert load(sc.workdir).bystander_pid == other  # in scenario.json, for `stop --dir`

    # The job ends; the bystander does not, and nobody may start another scenario over it.
    os.killpg(sc.pgid, signal.SIGKILL)
    assert sc._proc is not None and sc._proc.wait(timeout=5) == -signal.SIGKILL
    assert not sc.is_alive() and sc.bystander_alive()
    with pytest.raises(ScenarioError, match="already runs"):
        start(sc.name, sc.workdir)
    assert sc.stop()
    assert group_gone(other) and not sc.bystander_alive()


def test_a_bystander_that_does_not_start_is_an_error_and_no_job_starts(tmp_path: Path,
                                                                      with_bystander) -> None:
    name = with_bystander("import sys\nprint('no GPU here', flush=True)\nsys.exit(3)\n")
    with pytest.raises(ScenarioError, match=r"bystander \(pid \d+\) did not start \(exit status 3\): "
                                            "no GPU here"):
        start(name, tmp_path / "job")
    assert not (tmp_path / "job" / "scenario.json").exists()
    assert not (tmp_path / "job" / "train.log").exists()


def test_a_bystander_silent_past_the_deadline_is_killed(tmp_path: Path, with_bystander,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("scenarios.jobs.launch.BYSTANDER_READY_S", 1.0)
    name = with_bystander("import time\ntime.sleep(60)\n")
    with pytest.raises(ScenarioError, match=r"did not start \(exit status -9\): no output") as error:
        start(name, tmp_path / "job")
    pid = re.search(r"bystander \(pid (\d+)\)", str(error.value))
    assert pid is not None and group_gone(int(pid.group(1)))
    assert not (tmp_path / "job" / "train.log").exists()

"""Issue #29: the `thread_limit` scenario, a real job under a real limit on tasks, diagnosed end to end.

The job puts itself under pids.max 64 in a pids cgroup of its own (as root, where the cgroup tree
is writable) or under RLIMIT_NPROC as the user nobody (root is exempt from RLIMIT_NPROC), starts
reader threads until CPython raises `RuntimeError: can't start new thread`, and stays alive with
its threads. `runbook run host-faults --set log=LOG` goes from the log's error to the limits check
and concludes thread-limit with the limit, its value, the count and the job's threads.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import pytest

from tests.e2e.scenario_report import report_of

pytestmark = pytest.mark.e2e
LIMIT_LINE = r"task limit: (?:pids\.max 64 in cgroup (\S+)|ulimit -u (\d+) as uid (\d+))"


def _pids_cgroup_writable() -> str | None:
    """Why a pids cgroup cannot be made here (None when it can)."""
    if os.geteuid() != 0:
        return "not root: a pids cgroup of the test's own needs root"
    for folder in ("/sys/fs/cgroup", "/sys/fs/cgroup/pids"):
        if os.access(os.path.join(folder, "cgroup.procs"), os.W_OK):
            return None
    return "/sys/fs/cgroup is not writable here (no cgroup v2 or v1 pids controller to create a cgroup in)"


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"(?m)^Threads:\s*(\d+)", status).group(1))  # type: ignore[union-attr]


def _remove_cgroup(folder: str) -> None:
    """The job's cgroup once its processes are gone (bounded: 50 tries, 5 s)."""
    for _ in range(50):
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


@pytest.mark.parametrize("via", ["cgroup", "nproc"])
def test_thread_limit_diagnosed(scenario, via: str) -> None:
    if via == "cgroup" and (why := _pids_cgroup_writable()):
        pytest.skip(why)
    job = scenario("thread_limit", tag=via, extra_args=["--via", via])
    folder = ""
    try:
        assert job.wait_for_log(r"RuntimeError: can't start new thread", 60), job.read_log()[-2000:]
        log = job.read_log()
        limit = re.search(LIMIT_LINE, log)
        assert limit, log[-2000:]
        folder = limit.group(1) or ""
        # The real state: the job lives on, holding every task the limit allowed.
        assert job.is_alive()
        threads = _threads(job.pid)
        if via == "cgroup":
            assert threads == 64 == int(Path(folder, "pids.current").read_text())
            assert Path(folder, "pids.max").read_text().strip() == "64"
        else:
            assert 1 < threads <= int(limit.group(2))

        report = report_of(job, "run", "host-faults", "--set", f"log={job.log}",
                          "--set", "max_load_per_core=1000")  # a busy shared test machine is no fault here
        node = report["nodes"][0]
        assert node["conclusion"]["id"] == "thread-limit", [(e["step"], e["goto"]) for e in node["evidence"]]
        assert node["conclusion"]["taxonomy"] == ["launch.environment"]
        assert [e["step"] for e in node["evidence"]][-2:] == ["read-log", "thread-limits"]
        finding = node["finding"]
        assert finding.startswith("the log says: RuntimeError: can't start new thread; "), finding
        assert f"the job's 1 process(es) (pid {job.pid}) run {threads} threads" in finding
        if via == "cgroup":
            assert (f"tightest limit: pids.max of {folder} is 64 with 64 in use (100.0%); near: pids.max; "
                    "pids.events: ") in finding, finding
        else:
            cap = int(limit.group(2))
            assert (f"tightest limit: ulimit -u (RLIMIT_NPROC) of uid {limit.group(3)} is {cap} with {cap} "
                    "in use (100.0%); near: ulimit -u (RLIMIT_NPROC)") in finding, finding
        effects = {f["effect"] for f in node["conclusion"]["fixes"]}
        assert effects == {"read-only", "changes-state"}
    finally:
        job.stop()
        if folder:
            _remove_cgroup(folder)
            with contextlib.suppress(OSError):  # the shared parent, when no other run uses it
                os.rmdir(os.path.dirname(folder))

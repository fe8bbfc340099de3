"""Issue #29: Ray that cannot start on an HPC node, diagnosed end to end on real Ray (CPU).

`ray_long_temp_dir` runs `ray.init()` with TMPDIR set to a per-job scratch folder as an HPC batch
system does; Ray refuses the object store's socket path (longer than AF_UNIX's 107 bytes) before
it starts any process. `runbook run ray-startup` on the job's log concludes socket-path-too-long
with the path's length measured from Ray's own error.

`ray_open_files_limit` runs a driver under an open-files limit of 64: the raylet it starts runs
out of descriptors while starting workers and the driver waits forever; the runbook, given the
driver's pid, reads the limits of the raylet it started and concludes open-files-limit.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0  # ray imported on a busy 2-core machine; ray.init fails before it starts anything
ERROR = r"OSError: validate_socket_filename failed: AF_UNIX path length cannot exceed (\d+) bytes: (\S+)"


def test_long_tmpdir_diagnosed(scenario) -> None:
    job = scenario("ray_long_temp_dir")
    assert job.wait_for_log(ERROR, START_TIMEOUT_S), job.read_log()[-3000:]
    deadline = time.monotonic() + 60
    while job.is_alive() and time.monotonic() < deadline:  # the job exits on Ray's error
        time.sleep(0.2)
    assert not job.is_alive(), job.read_log()[-2000:]
    limit, path = re.search(ERROR, job.read_log()).groups()
    assert limit == "107" and "/slurm_jobdir/48213377/tmp.node0001/ray/session_" in path
    assert path.endswith("/sockets/plasma_store") and len(path.encode()) > 107

    env = {**job.tool_env(), "RUNBOOK_LANG": "en"}
    out = subprocess.run([sys.executable, "-m", "runbook", "run", "ray-startup", "--set", f"log={job.log}",
                          "--format", "json"], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    report = json.loads(out.stdout)
    node = report["nodes"][0]
    walked = [(e["step"], e["goto"]) for e in node["evidence"]]
    assert node["conclusion"]["id"] == "socket-path-too-long", walked
    assert node["conclusion"]["taxonomy"] == ["launch.environment"]
    finding = node["finding"]
    size = len(path.encode())
    assert f"Ray's socket path is {size} bytes, {size - 107} over the 107-byte AF_UNIX limit: " \
           f"{path}" in finding
    temp_dir = path.split("/session_")[0]
    assert f"temp dir {temp_dir} ({len(temp_dir.encode())} bytes, from the error in the log)" in finding
    assert finding.endswith("a temp dir of at most 43 bytes fits"), finding
    assert out.returncode == 1  # a critical conclusion: the run found a problem


def test_open_files_limit_diagnosed(scenario) -> None:
    job = scenario("ray_open_files_limit")
    # Ray meets the limit in one of two places, by how fast its workers come up: the raylet
    # refuses their connections and lives on (the driver waits forever), or it cannot create a
    # worker's files and aborts (worker_pool.cc, seen on a loaded machine).
    refused = "Raylet failed to accept new connection: Too many open files"
    aborted = "Too many workers, failed to create a file"
    assert job.wait_for_log(f"{refused}|{aborted}", START_TIMEOUT_S), job.read_log()[-3000:]
    raylet_died = aborted in job.read_log()
    if not raylet_died:
        assert job.wait_for_log(r"Waiting for \d+ workers", 60), job.read_log()[-2000:]
        assert job.is_alive()  # the driver waits for actors that never start
    else:  # without its raylet the driver gives up: let it end, so no pid is read half-gone
        deadline = time.monotonic() + 120
        while job.is_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not job.is_alive(), job.read_log()[-2000:]

    env = {**job.tool_env(), "RUNBOOK_LANG": "en"}
    pid = [] if raylet_died else ["--set", f"pid={job.pid}"]
    out = subprocess.run([sys.executable, "-m", "runbook", "run", "ray-startup", "--set", f"log={job.log}",
                          *pid, "--format", "json"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    report = json.loads(out.stdout)
    node = report["nodes"][0]
    walked = [(e["step"], e["goto"]) for e in node["evidence"]]
    assert node["conclusion"]["id"] == "open-files-limit", walked
    finding = node["finding"]
    assert "Ray asks for at least 8192" in finding, finding
    if raylet_died:  # the limits of the node's new processes, and Ray's own last words
        assert finding.startswith("no raylet runs now (it crashed, or the job ended); "), finding
        assert "worker_pool.cc" in finding and finding.endswith(
            f"{aborted}. Try setting `ulimit -n <num_files>` then restart Ray."), finding
    else:
        raylet = re.search(r"open files of raylet pid (\d+) \(started by pid (\d+)\): ", finding)
        assert raylet and int(raylet.group(2)) == job.pid, finding
        assert "soft limit 64, hard limit 64, " in finding
        # Ray's last open-files line: the raylet refusing a connection, or, on a loaded machine,
        # gRPC failing to open a socket after it (`socket(...) returned -1 ... Too many open files`)
        said = finding.split("the log says: ", 1)[-1]
        assert said.endswith(refused) or "|Too many open files|" in said, finding
    assert "\x1b" not in finding  # the message, without Ray's colour codes
    assert out.returncode == 1

"""The `open_files_limit` scenario, a real job under a real `ulimit -n`, diagnosed end to end.

The job lowers its soft RLIMIT_NOFILE to 64, opens its dataset's shards until CPython raises
`OSError: [Errno 24] Too many open files`, and stays alive with its descriptors. `runbook run
host-faults --set log=LOG` goes from the log's error to the limits check and concludes
open-files-limit with the job's process, its descriptors and its soft and hard limits.
"""

from __future__ import annotations

import os
import re

import pytest

from tests.e2e.scenario_report import report_of

pytestmark = pytest.mark.e2e


def test_open_files_limit_diagnosed(scenario) -> None:
    job = scenario("open_files_limit")
    try:
        assert job.wait_for_log(r"OSError: \[Errno 24\] Too many open files", 60), job.read_log()[-2000:]
        limit = re.search(r"open files limit: ulimit -n (\d+) \(hard (\d+)\)", job.read_log())
        assert limit, job.read_log()[-2000:]
        assert job.is_alive()
        held = len(os.listdir(f"/proc/{job.pid}/fd"))  # the real state: the job at its limit
        assert held == int(limit.group(1))

        report = report_of(job, "run", "host-faults", "--set", f"log={job.log}",
                          "--set", "max_load_per_core=1000")  # a busy shared test machine is no fault here
        node = report["nodes"][0]
        walked = [(e["step"], e["goto"]) for e in node["evidence"]]
        assert node["conclusion"]["id"] == "open-files-limit", walked
        assert [e["step"] for e in node["evidence"]][-2:] == ["read-log", "file-limits"]
        finding = node["finding"]
        assert finding.startswith("the log says: OSError: [Errno 24] Too many open files: "), finding
        assert (f"the job's process {job.pid} holds {held} file descriptors against a soft limit "
                f"(ulimit -n) of {limit.group(1)}, hard {limit.group(2)}") in finding, finding
    finally:
        job.stop()

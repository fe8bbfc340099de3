"""`runbook run --executor ray` on a real local multi-node Ray cluster.

The Ray nodes of a local cluster share this machine, so each sees the same job: every
node must reach the conclusion the local transport reaches for that job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.clusters.ray import RayCluster
from scenarios.jobs import start
from tests import ray_fixture

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.e2e


ray_cluster = ray_fixture.ray_cluster


@pytest.fixture(scope="module")
def ray_address(ray_cluster: RayCluster) -> str:
    return ray_cluster.address  # three nodes on loopback, one CPU and a small object store each


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runbook", "run", "training-hang", *args,
                           "--format", "json"], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "RUNBOOK_LANG": "en", **(env or {})})


@pytest.mark.parametrize(("scenario", "ready", "expected"), [
    ("healthy", r"step \d+ \|", "healthy"),
    ("loader_accumulating", r"Token buffer:", "dataloader-accumulating"),
])
def test_ray_nodes_conclude_like_the_local_transport(ray_address: str, tmp_path: Path,
                                                     scenario: str, ready: str,
                                                     expected: str) -> None:
    job = start(scenario, tmp_path / scenario)
    try:
        assert job.wait_for_log(ready, timeout=30)
        sets = ["--set", f"log={job.log}", "--set", f"pid={job.pid}"]
        local = json.loads(run(*sets).stdout)
        out = run("--executor", "ray", "--ray-address", ray_address, *sets)
        report = json.loads(out.stdout)
    finally:
        job.stop()
    assert local["nodes"][0]["conclusion"]["id"] == expected
    assert len(report["nodes"]) == 3
    assert len({n["node"] for n in report["nodes"]}) == 3
    assert {n["conclusion"]["id"] for n in report["nodes"]} == {expected}, report["nodes"]
    assert out.returncode == 0


def test_a_bad_ray_address_is_a_usage_error() -> None:
    out = run("--executor", "ray", "--ray-address", "127.0.0.1:1")
    assert out.returncode == 2
    assert "no Ray cluster at 127.0.0.1:1" in out.stderr

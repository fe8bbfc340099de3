"""A real incident becomes a test: `runbook run --record` on a faulty job, then `runbook test
--replay` with today's runbooks (same conclusion) and with an edited copy (CHANGED)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def runbook(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True, text=True,
                          env={**os.environ, "RUNBOOK_LANG": "en", **(env or {})}, timeout=180,
                          cwd=ROOT)


def test_a_recorded_loader_incident_replays_and_notices_a_changed_runbook(scenario,
                                                                          tmp_path: Path) -> None:
    job = scenario("loader_accumulating")
    assert job.wait_for_log(r"Token buffer:", timeout=30)
    folder = tmp_path / "incident"
    run = runbook("run", "training-hang", "--set", f"log={job.log}", "--set", f"pid={job.pid}",
                  "--format", "json", "--record", str(folder), env=job.tool_env())
    assert run.stdout, run.stderr
    node = json.loads(run.stdout)["nodes"][0]
    assert node["conclusion"]["id"] == "dataloader-accumulating", node
    assert node["path"] == ["find-process", "read-log", "loader-gpu"]
    assert job.stop()  # the replay needs no job: the recording answers every check

    recorded = json.loads((folder / "incident.json").read_text())["nodes"][0]
    assert list(recorded["results"]) == node["path"]
    assert recorded["results"]["find-process"][0]["result"]["pid"] == job.pid
    same = runbook("test", "--replay", str(folder))
    assert same.returncode == 0, same.stdout + same.stderr
    assert f"  {node['node']}: same conclusion dataloader-accumulating" in same.stdout

    # A copy of the library whose loader-gpu step now reads a GPU that answers as a hang.
    library = tmp_path / "library"
    shutil.copytree(ROOT / "runbooks", library, ignore=shutil.ignore_patterns("recordings"))
    tree = library / "training-hang.yaml"
    text = tree.read_text()
    step = text.index("  loader-gpu:\n")
    edited = text[step:].replace("- when: result.timed_out", "- when: not result.timed_out", 1)
    tree.write_text(text[:step] + edited)
    changed = runbook("test", str(library), "--replay", str(folder))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert (f"  {node['node']}: CHANGED: was dataloader-accumulating, now gpu-driver-hang "
            "(path find-process → read-log → loader-gpu)") in changed.stdout, changed.stdout

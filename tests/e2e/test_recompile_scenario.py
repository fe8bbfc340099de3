"""Issue #29: a real torch.compile job that recompiles at every step, diagnosed end to end.

`recompile_limit` trains a multi-task model through a compiled step that takes the task's name as
a Python string, so dynamo recompiles for each new task until its recompile limit;
`runbook run slow-training` concludes recompiles from the log, naming the guard that failed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180.0  # torch imported on a busy 2-core machine


def test_recompiling_job_diagnosed(scenario) -> None:
    job = scenario("recompile_limit", speed=4)
    assert job.wait_for_log(r"\[0/8\] \[__recompiles\] Recompiling function loss_of", START_TIMEOUT_S), \
        job.read_log()[-3000:]
    assert job.wait_for_log(r"(?m)^step 24 \|", 60), job.read_log()[-2000:]
    log = job.read_log()
    # Eight recompilations (0/1 .. 0/8), then the limit: dynamo gives up, training goes on.
    assert len(re.findall(r"Recompiling function loss_of", log)) == 8, log[-3000:]
    assert "torch._dynamo hit config.recompile_limit (8)" in log
    assert "[0/9]" not in log and job.is_alive()

    env = {**job.tool_env(), "RUNBOOK_LANG": "en"}
    out = subprocess.run([sys.executable, "-m", "runbook", "run", "slow-training", "--set", f"log={job.log}",
                          "--format", "json"], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    report = json.loads(out.stdout)
    node = report["nodes"][0]
    assert node["conclusion"]["id"] == "recompiles", [(e["step"], e["goto"]) for e in node["evidence"]]
    assert node["conclusion"]["taxonomy"] == ["perf.host-sync"]
    finding = node["finding"]
    count = int(re.search(r"the log shows (\d+) recompilation\(s\)", finding).group(1))
    assert count == 8, finding
    assert "Recompiling function loss_of in" in finding and "task == 'task" in finding, finding
    assert "dynamo gave up: " in finding and "torch._dynamo hit config.recompile_limit (8)" in finding
    assert out.returncode == 1  # a warning: the run found a problem

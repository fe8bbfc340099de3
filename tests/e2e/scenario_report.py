"""`runbook ... --format json` against a running scenario job, as its tests read the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from scenarios.jobs import Scenario

ROOT = Path(__file__).resolve().parents[2]


def report_of(job: Scenario, *args: str) -> dict[str, Any]:
    """The JSON report of `runbook ARGS` run with the job's tool environment, in English."""
    env = {**job.tool_env(), "RUNBOOK_LANG": "en"}
    out = subprocess.run([sys.executable, "-m", "runbook", *args, "--format", "json"], capture_output=True,
                         text=True, env=env, timeout=180, cwd=ROOT)
    assert out.stdout, out.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.stdout)
    return report

"""Shared fixtures: the repository root, and `runbook` run as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def runbook_cli():
    """Run the real `runbook` entry point in a subprocess; returns CompletedProcess."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
            cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "RUNBOOK_LANG": "en", **(env or {})}
        return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True,
                              text=True, env=full_env, timeout=timeout, cwd=cwd)

    return run

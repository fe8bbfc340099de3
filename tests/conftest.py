"""Shared fixtures: the repository root, and `runbook` run as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="session")
def _session_cache(tmp_path_factory: pytest.TempPathFactory):
    """The suite's own load cache (`$XDG_CACHE_HOME/runbook`), shared by every test and the
    `runbook` processes they start, so nothing is written to the real ~/.cache."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture
def runbook_cli():
    """Run the real `runbook` entry point in a subprocess; returns CompletedProcess."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
            cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "RUNBOOK_LANG": "en", **(env or {})}
        return subprocess.run([sys.executable, "-m", "runbook", *args], capture_output=True,
                              text=True, env=full_env, timeout=timeout, cwd=cwd)

    return run

"""`runbook run --watch` on the loader scenario: it ends when the first batch arrives."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios.jobs import start

pytestmark = pytest.mark.e2e


def test_watch_ends_when_the_first_batch_arrives(tmp_path: Path) -> None:
    job = start("loader_accumulating", tmp_path / "job", speed=8)  # first batch after ~15 s
    try:
        assert job.wait_for_log(r"Token buffer:", timeout=30)
        begin = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "runbook", "run", "training-hang", "--set", f"log={job.log}",
             "--set", f"pid={job.pid}", "--watch", "2", "--watch-for", "180", "--format", "json"],
            capture_output=True, text=True, timeout=240)
        elapsed = time.monotonic() - begin
        report = json.loads(out.stdout)
        node = report["nodes"][0]
        assert node["conclusion"]["id"] == "healthy", out.stderr[-2000:]
        assert out.returncode == 0
        rounds = [line for line in out.stderr.splitlines() if line.startswith("[watch #")]
        assert "dataloader-accumulating" in rounds[0] and "Token buffer:" in rounds[0]
        assert "%" in rounds[0]  # progress shown as a share of the buffer
        assert "changed after" in out.stderr and "dataloader-accumulating → healthy" in out.stderr
        assert "step" in job.read_log().lower()  # training really started
        assert elapsed < 180  # it stopped on the change, not on --watch-for
    finally:
        job.stop()


def test_watch_gives_up_after_watch_for(tmp_path: Path) -> None:
    job = start("healthy", tmp_path / "job", speed=1)
    try:
        assert job.wait_for_log(r"step", timeout=30)
        out = subprocess.run(
            [sys.executable, "-m", "runbook", "run", "training-hang", "--set", f"log={job.log}",
             "--set", f"pid={job.pid}", "--watch", "1", "--watch-for", "4", "--format", "json"],
            capture_output=True, text=True, timeout=120)
        assert "nothing changed in 4 s" in out.stderr
        assert json.loads(out.stdout)["nodes"][0]["conclusion"]["id"] == "healthy"
    finally:
        job.stop()

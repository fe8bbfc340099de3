"""No fix carries the PID of a process the diagnosis did not tie to the job, unless the fix's
purpose is to end that process (and then it is `disruptive`: it runs only with --apply --yes).
Checked on real recordings: a stale torch notebook beside a job that died of OOM."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runbook.library.runbooks import load_library
from runbook.report.build import build_report
from runbook.run.recording import load_recording
from runbook.run.replay import replay

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "runbooks" / "recordings"


def _foreign_pids(recording_dir: Path) -> set[int]:
    pids: set[int] = set()
    for node in load_recording(recording_dir).nodes:
        for answers in node.results.values():
            for answer in answers:
                result = answer.get("result") or {}
                pids.update(int(f["pid"]) for f in result.get("foreign") or [])
    return pids


@pytest.mark.parametrize("name", ["oom_other_process", "oom_other_process-training-hang"])
def test_only_the_fix_that_ends_a_foreign_process_names_it(name: str) -> None:
    library = load_library([ROOT / "runbooks"])
    recording = load_recording(RECORDINGS / name)
    foreign = _foreign_pids(RECORDINGS / name)
    assert foreign, "the recording has a foreign process (the stale notebook)"
    done = replay(library, recording)
    report = build_report(done.runbook, done.outcomes, "2026-11-28T00:00:00Z", 0.0, "en", recording.params)
    [node] = report["nodes"]
    assert node["conclusion"]["id"] == "gpu-held-by-other-process"
    naming = [fix for fix in node["conclusion"]["fixes"]
              if fix.get("run") and foreign & {int(p) for p in re.findall(r"\b\d{3,}\b", fix["run"])}]
    assert [fix["title"] for fix in naming] == ["End the leftover process"]
    assert naming[0]["effect"] == "disruptive"

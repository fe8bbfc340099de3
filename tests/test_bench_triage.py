"""bench/triage.py's --added-since: each split again for the corpus's logs present at a git
revision and for those added since (a fresh holdout reported as it came)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # bench/triage.py imports its corpus loader from there
_spec = importlib.util.spec_from_file_location("bench_triage", ROOT / "bench" / "triage.py")
assert _spec and _spec.loader
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _row(log: str, split: str, top1: bool) -> dict[str, object]:
    return {"log": log, "split": split, "kind": "error", "wanted": None, "verdict": "cause",
            "says_something": True, "compared": False, "read_numbers": False,
            "top1": top1, "top3": top1, "conclusion1": False, "conclusion3": False}


def test_logs_added_after_a_revision_are_summarised_apart() -> None:
    present = sorted(bench.entries_at("HEAD"))
    assert len(present) > 100 and all(name.endswith(".log") for name in present)
    rows = [_row(present[0], "holdout", True), _row(present[1], "dev", False),
            _row("new-project/1-not-in-git.log", "holdout", False)]
    summary = {s["split"]: s for s in bench.by_age(rows, "HEAD")}
    assert (summary["holdout-old"]["logs"], summary["holdout-old"]["top1_pct"]) == (1, 100.0)
    assert (summary["holdout-new"]["logs"], summary["holdout-new"]["top1_pct"]) == (1, 0.0)
    assert summary["dev-old"]["logs"] == 1 and summary["dev-new"]["logs"] == 0


def test_an_unknown_revision_is_one_clear_error() -> None:
    with pytest.raises(SystemExit, match="--added-since no-such-rev: git cannot list the corpus there"):
        bench.entries_at("no-such-rev")


def test_every_chunk_of_signatures_compiles_in_grep(tmp_path: Path) -> None:
    """PCRE2 refuses one alternation of every signature (`regular expression is too large`): the
    chunks cover every pattern, and grep -P compiles each of them."""
    import subprocess

    parts = bench.grep_patterns()
    chunks = bench.grep_chunks(parts)
    assert "|".join(chunks) == "|".join(parts) and len(chunks) > 1
    log = tmp_path / "a.log"
    log.write_text("NCCL WARN Cuda failure 'out of memory'\nstep 1 loss 2.0\n")
    for chunk in chunks:
        grep = subprocess.run(["grep", "-P", "-c", chunk, str(log)], capture_output=True, text=True,
                              timeout=60)
        assert grep.returncode in (0, 1), grep.stderr

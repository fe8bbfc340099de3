"""Logs nobody should have to paste still get a clear answer, in bounded memory and time.

Each log goes through the real CLI under a 1 GiB address-space limit.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from runbook.triage.logstream import MAX_LINE, LogShape, read_lines

ROOT = Path(__file__).resolve().parents[2]
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def triage(path: Path) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "runbook", "triage", str(path), "--format", "json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, preexec_fn=_limit_memory,
                          env={**os.environ, "RUNBOOK_LANG": "en"})
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


def test_an_empty_log_says_it_is_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    code, doc = triage(tmp_path / "empty.log")
    assert code == 1 and doc["matches"] == [] and doc["notes"] == ["the log is empty"]


def test_random_bytes_are_called_binary(tmp_path: Path) -> None:
    (tmp_path / "core").write_bytes(random.Random(7).randbytes(3 << 20))
    code, doc = triage(tmp_path / "core")
    assert code == 1 and doc["matches"] == []
    assert doc["notes"][0].startswith("the file looks binary, not a text log (")


def test_one_line_of_100_mb_is_cut_and_the_next_line_still_read(tmp_path: Path) -> None:
    with (tmp_path / "line.log").open("w") as fh:
        for _ in range(100):
            fh.write("x" * 1_000_000)
        fh.write("\n" + OOM + "\n")
    code, doc = triage(tmp_path / "line.log")
    assert code == 0 and doc["matches"][0]["runbook"] == "cuda-oom"
    assert doc["lines"] == 2
    assert doc["notes"] == [f"1 line(s) longer than {MAX_LINE:,} characters were cut there"]


def test_nul_bytes_and_other_encodings_are_read_not_refused(tmp_path: Path) -> None:
    (tmp_path / "nul.log").write_bytes(b"step 1\x00\x00 loss 2.0\n" * 1000 + OOM.encode() + b"\x00\n")
    assert triage(tmp_path / "nul.log")[1]["matches"][0]["runbook"] == "cuda-oom"
    (tmp_path / "gbk.log").write_bytes(("训练开始\n错误：" + OOM + "\n").encode("gbk"))
    assert triage(tmp_path / "gbk.log")[1]["matches"][0]["runbook"] == "cuda-oom"


def test_a_truncated_gzip_log_gives_what_was_readable_or_one_line(tmp_path: Path) -> None:
    whole = gzip.compress(("step 1 | loss 2.0\n" * 50_000 + OOM + "\n").encode())
    (tmp_path / "cut.log.gz").write_bytes(whole[: len(whole) // 2])
    done = subprocess.run([sys.executable, "-m", "runbook", "triage", str(tmp_path / "cut.log.gz")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "runbook triage: the log stops being readable: Compressed file ended before the "
        "end-of-stream marker was reached"]


@pytest.mark.parametrize(("text", "binary"), [("plain text\n" * 10, False),
                                              ("\x01\x02\x03\x04\n" * 10, True)])
def test_the_shape_of_a_log(tmp_path: Path, text: str, binary: bool) -> None:
    shape = LogShape()
    (tmp_path / "x").write_text(text)
    with (tmp_path / "x").open("rb") as raw:
        assert sum(1 for _ in read_lines(raw, shape)) == 10
    assert (shape.lines, shape.binary, shape.empty) == (10, binary, False)

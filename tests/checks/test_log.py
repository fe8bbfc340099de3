"""`log` against real log files written by the test."""

from __future__ import annotations

import os
import time
from pathlib import Path

from runbook.checks import log

SEED_LOG = (
    "[Rank 0] 初始化完成，world_size=8\n"
    "[DataLoader] 进度: 8 个文档批次, Token buffer: 40000/65537 (61%)\n"
    "step 11 | loss 2.7 | lr 3.0e-4\n"
    "[DataLoader] 进度: 10 个文档批次, Token buffer: 50000/65537 (76%)\n"
    "step 12 | loss 2.5 | lr 3.0e-4\n"
    "[DataLoader] 进度: 12 个文档批次, Token buffer: 60000/65537 (91%)\n"
)
PATTERNS = {
    "buffer": r"Token buffer: (\d+)/(\d+)",
    "step": r"step (\d+) \| loss ([\d.]+)",
    "nccl": r"NCCL (WARN|ERROR)",
}


def write(path: Path, text: str | bytes, age_s: float = 0.0) -> Path:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def test_seed_log_patterns(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "train.log", SEED_LOG, age_s=120)
    result = log.run({"path": str(path), "patterns": PATTERNS, "tail": 2}, make_ctx())
    assert result["exists"] is True and result["reason"] is None
    assert result["path"] == str(path)
    assert result["lines_read"] == 6
    assert result["size_bytes"] == len(SEED_LOG.encode("utf-8"))
    assert 119 < result["age_s"] < 125
    assert result["tail"] == [
        "step 12 | loss 2.5 | lr 3.0e-4",
        "[DataLoader] 进度: 12 个文档批次, Token buffer: 60000/65537 (91%)",
    ]
    assert result["patterns"]["buffer"] == {
        "count": 3,
        "last_line": "[DataLoader] 进度: 12 个文档批次, Token buffer: 60000/65537 (91%)",
        "last_line_no": 6,
        "last_groups": ["60000", "65537"],
        "last_value": 60000.0,
    }
    assert result["patterns"]["step"]["count"] == 2
    assert result["patterns"]["step"]["last_line_no"] == 5
    assert result["patterns"]["step"]["last_groups"] == ["12", "2.5"]
    assert result["patterns"]["step"]["last_value"] == 12.0
    assert result["patterns"]["nccl"] == {
        "count": 0, "last_line": None, "last_line_no": None, "last_groups": [],
        "last_value": None,
    }
    assert result["last_pattern"] == "buffer"
    assert result["pattern_errors"] == {}


def test_last_pattern_follows_latest_line(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "train.log", SEED_LOG + "step 13 | loss 2.4 | lr 3.0e-4\n")
    result = log.run({"path": str(path), "patterns": PATTERNS}, make_ctx())
    assert result["last_pattern"] == "step"
    assert result["patterns"]["step"]["last_value"] == 13.0
    assert result["tail"][-1] == "step 13 | loss 2.4 | lr 3.0e-4"
    assert len(result["tail"]) == 7  # default tail 20, fewer lines


def test_no_group_and_non_numeric_group(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "x.log", "NCCL WARN timeout\nhello world\n")
    result = log.run(
        {"path": str(path), "patterns": {"warn": "NCCL WARN", "word": r"(hello) (\w+)"}},
        make_ctx(),
    )
    assert result["patterns"]["warn"]["last_groups"] == []
    assert result["patterns"]["warn"]["last_value"] is None
    assert result["patterns"]["word"]["last_groups"] == ["hello", "world"]
    assert result["patterns"]["word"]["last_value"] is None


def test_invalid_regex_does_not_crash(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "x.log", SEED_LOG)
    result = log.run({"path": str(path), "patterns": {"bad": "(oops", **PATTERNS}}, make_ctx())
    assert list(result["pattern_errors"]) == ["bad"]
    assert "missing )" in result["pattern_errors"]["bad"]
    assert "bad" not in result["patterns"]
    assert result["patterns"]["buffer"]["count"] == 3


def test_crlf_progress_bars_and_partial_last_line(tmp_path: Path, make_ctx) -> None:
    text = (
        "epoch 1\r\n"
        "  0%|          | 0/100\r 50%|#####     | 50/100\r100%|##########| 100/100\n"
        "\n"
        "step 3 | loss 1.5 | lr 1e-4\r\n"
        "step 4 | loss 1.4"  # still being written
    )
    path = write(tmp_path / "x.log", text)
    result = log.run({"path": str(path), "patterns": {"pct": r"(\d+)%\|"}}, make_ctx())
    assert result["tail"] == [
        "epoch 1",
        "  0%|          | 0/100",
        " 50%|#####     | 50/100",
        "100%|##########| 100/100",
        "step 3 | loss 1.5 | lr 1e-4",
        "step 4 | loss 1.4",
    ]
    assert result["patterns"]["pct"]["count"] == 3
    assert result["patterns"]["pct"]["last_value"] == 100.0


def test_max_bytes_reads_only_whole_lines_from_the_end(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "big.log", "".join(f"line {i}\n" for i in range(1000)))
    result = log.run({"path": str(path), "max_bytes": 50, "tail": 500}, make_ctx())
    # 9 bytes a line: 50 bytes hold 5 whole lines and the end of "line 994", which is dropped.
    assert result["tail"] == [f"line {i}" for i in range(995, 1000)]
    assert result["lines_read"] == 5
    # A limit that falls exactly on a line start keeps that line.
    exact = log.run({"path": str(path), "max_bytes": 9, "tail": 5}, make_ctx())
    assert exact["tail"] == ["line 999"]


def test_tail_limits_and_long_lines(tmp_path: Path, make_ctx) -> None:
    path = write(tmp_path / "x.log", b"a" * 1000 + b"\nbad \xff byte\n")
    result = log.run({"path": str(path), "tail": 2}, make_ctx())
    assert result["tail"] == ["a" * 400, "bad \ufffd byte"]
    assert log.run({"path": str(path), "tail": 0}, make_ctx())["tail"] == []


def test_glob_picks_newest(tmp_path: Path, make_ctx) -> None:
    old = write(tmp_path / "rank0.log", "old\n", age_s=600)
    new = write(tmp_path / "rank1.log", "new line\n", age_s=5)
    (tmp_path / "dir.log").mkdir()
    result = log.run({"path": str(tmp_path / "*.log")}, make_ctx())
    assert result["path"] == str(new)
    assert result["tail"] == ["new line"]
    assert [f["path"] for f in result["files"]] == [str(new), str(old)]
    assert [f["size_bytes"] for f in result["files"]] == [9, 4]
    assert 4 < result["age_s"] < 10
    assert 599 < result["files"][1]["age_s"] < 605


def test_no_path_and_missing_files(tmp_path: Path, make_ctx) -> None:
    empty = log.run({"path": ""}, make_ctx())
    assert empty["exists"] is False
    assert empty["reason"] == "no log path given (--set log=PATH)"
    assert empty["tail"] == [] and empty["patterns"] == {} and empty["age_s"] is None
    # Patterns are still reported (count 0), so runbook expressions need no guard.
    with_patterns = log.run({"path": "", "patterns": {"loss": "loss", "bad": "("}}, make_ctx())
    assert with_patterns["patterns"]["loss"]["count"] == 0
    assert list(with_patterns["pattern_errors"]) == ["bad"]
    assert log.run({}, make_ctx())["reason"] == "no log path given (--set log=PATH)"
    missing = log.run({"path": str(tmp_path / "nope.log")}, make_ctx())
    assert missing["exists"] is False
    assert missing["reason"] == f"{tmp_path / 'nope.log'} does not exist or is not a regular file"
    no_match = log.run({"path": str(tmp_path / "*.log")}, make_ctx())
    assert no_match["reason"] == f"no file matches {tmp_path / '*.log'}"

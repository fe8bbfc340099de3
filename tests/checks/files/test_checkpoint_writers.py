"""`checkpoint_writers`: save lines of several writers on one path, truncated archives, temp files.

The archives are real torch.save zips (cut the way a second writer leaves them), the save lines
the shapes real trainers print (a `[rankN]:` prefix from torchrun, a `node1:` prefix from pdsh).
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

from runbook.checks.files import checkpoint_writers as cw


def test_save_lines_name_their_path() -> None:
    assert cw.save_target("[rank4]: saving checkpoint to /shared/run7/last.pt") == "/shared/run7/last.pt"
    assert cw.save_target("Saving model checkpoint to /out/checkpoint-500/") == "/out/checkpoint-500"
    assert cw.save_target("[INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: "
                          "/out/global_step10/mp_rank_00_model_states.pt") \
        == "/out/global_step10/mp_rank_00_model_states.pt"
    assert cw.save_target("step 10 | loss 2.31") is None
    assert cw.save_target("[rank0]: saved 3 files") is None


def test_writer_is_log_host_and_rank() -> None:
    assert cw.writer("node1: [rank8]: saving checkpoint to x.pt", "") == "node1/rank8"
    assert cw.writer("[rank0]: saving checkpoint to x.pt", "n0.log") == "n0.log/rank0"
    assert cw.writer("saving checkpoint to x.pt", "") == "?"


def test_two_nodes_saving_one_path(tmp_path: Path, make_ctx: Any) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.zeros(256)}, ckpt / "last.pt")
    whole = (ckpt / "last.pt").read_bytes()
    (ckpt / "last.pt").write_bytes(whole[: len(whole) // 2])  # the other writer's truncate
    torch.save({"w": torch.zeros(4)}, ckpt / "step_10.pt")
    (ckpt / "tmp.pt").write_bytes(b"")
    (ckpt / ".nfs0000000000a1b2c300000001").write_bytes(b"x")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "node-a.log").write_text(f"step 20 | loss 1.9\n[rank0]: saving checkpoint to {ckpt}/last.pt\n")
    (logs / "node-b.log").write_text(f"step 20 | loss 1.9\n[rank4]: saving checkpoint to {ckpt}/last.pt\n"
                                     f"[rank4]: saving checkpoint to {ckpt}/step_10.pt\n")
    result = cw.run({"path": str(ckpt / "last.pt"), "logs": str(logs / "*.log")}, make_ctx(10))
    assert result["exists"] and result["dir"] == str(ckpt)
    assert result["logs_read"] == 2 and result["shared_count"] == 1
    assert result["shared"][0]["path"] == f"{ckpt}/last.pt"
    assert result["writers"] == ["node-a.log/rank0", "node-b.log/rank4"]
    assert [(t["file"], t["why"]) for t in result["truncated"]] == [
        (str(ckpt / "last.pt"), "zip without its end-of-central-directory record (written partly)"),
        (str(ckpt / "tmp.pt"), "empty (0 bytes)")]
    assert result["temp_files"] == [".nfs0000000000a1b2c300000001", "tmp.pt"]
    assert result["reason"] is None


def test_one_writer_and_a_safetensors_file_cut_short(tmp_path: Path, make_ctx: Any) -> None:
    raw = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(8))
    log = tmp_path / "train.log"
    log.write_text("[rank0]: saving checkpoint to out/model.safetensors\n" * 3)
    result = cw.run({"path": str(tmp_path), "logs": f"{log} {tmp_path}/missing.log"}, make_ctx(10))
    assert result["shared_count"] == 0 and result["logs_read"] == 1
    assert result["truncated"][0]["why"].startswith("tensors need")
    assert "cannot read" in result["reason"] and "missing.log" in result["reason"]


def test_nothing_at_the_path(tmp_path: Path, make_ctx: Any) -> None:
    result = cw.run({"path": str(tmp_path / "nope" / "*.pt")}, make_ctx(5))
    assert not result["exists"] and result["reason"].startswith("nothing matches")
    assert result["shared"] == [] and result["truncated"] == []


def test_a_long_log_stops_at_the_deadline(tmp_path: Path, make_ctx: Any) -> None:
    log = tmp_path / "huge.log"
    log.write_text("step 1 | loss 2.0\n" * 100_000)
    ctx = make_ctx(5)
    ctx.deadline = 0.0  # already past: the scan must give up at its first time check
    shared, read, problems = cw.scan_logs([str(log)], ctx)
    assert shared == [] and read == 0 and problems == ["out of time reading the logs"]


def test_a_long_log_stops_mid_file(tmp_path: Path, make_ctx: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "huge.log"
    log.write_text("step 1 | loss 2.0\n" * 50_000)
    ctx = make_ctx(5)
    ctx.deadline = 100.0
    clock = iter([0.0] + [1e9] * 10)  # in time for the file, out of time at its 20000th line
    monkeypatch.setattr(cw, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    shared, read, problems = cw.scan_logs([str(log)], ctx)
    assert read == 1 and problems == [f"out of time in {log} at line 20000 of 50000"]
